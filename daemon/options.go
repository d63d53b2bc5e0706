package daemon

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"google.golang.org/protobuf/encoding/protojson"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claude"
)

// SessionOptions are a session's launch options as clients send them. They
// are declared once, as the claudectl.v1.SessionOptions message of
// api/claudectl/v1/claudectl.proto; the daemon stores them with the
// session in their JSON form (proto field names) and ClaudeOptions alone
// turns them into the SDK's options. Adding an option is a proto field
// plus its line in ClaudeOptions; TestSessionOptionsEveryField proves both
// for every field.
type SessionOptions = v1.SessionOptions

// Where a session's CLI runs (SessionOptions.Worker).
const (
	WorkerLocal  = "local"  // a child process of the daemon ("" too)
	WorkerRemote = "remote" // the next "claudectl worker" that connects
)

// ClaudeOptions maps a session's options to the SDK's: the one place where a
// session option becomes a CLI flag. The daemon adds what is its own (the
// transport, the permission callback, resume and fork, the environment).
// Worker is not a CLI option: it picks the transport.
func ClaudeOptions(o *SessionOptions) claude.Options {
	return claude.Options{
		Cwd:                    o.GetCwd(),
		Model:                  o.GetModel(),
		PermissionMode:         claude.PermissionMode(o.GetPermissionMode()),
		AllowedTools:           o.GetAllowedTools(),
		DisallowedTools:        o.GetDisallowedTools(),
		AddDirs:                o.GetAddDirs(),
		SystemPrompt:           o.GetSystemPrompt(),
		AppendSystemPrompt:     o.GetAppendSystemPrompt(),
		MaxTurns:               int(o.GetMaxTurns()),
		MaxBudgetUSD:           o.GetMaxBudgetUsd(),
		IncludePartialMessages: o.GetIncludePartialMessages(),
		ExtraArgs:              o.GetExtraArgs(),
	}
}

// validateOptions checks o once, up front: what the daemon itself needs
// (a working directory, a known worker) and everything the SDK checks,
// with the error naming the request field (options.max_turns).
func (d *Daemon) validateOptions(o *SessionOptions) error {
	switch o.GetWorker() {
	case "", WorkerLocal:
	case WorkerRemote:
		if d.workers == nil {
			return &InvalidArgumentError{Field: "options.worker", Value: o.GetWorker(),
				Reason: "this daemon accepts no remote workers: start it with workers.token_file in settings.json"}
		}
	default:
		return &InvalidArgumentError{Field: "options.worker", Value: o.GetWorker(), Reason: `must be "local" or "remote"`}
	}
	if o.GetCwd() == "" {
		return &InvalidArgumentError{Field: "options.cwd", Value: "", Reason: "required"}
	}
	co := ClaudeOptions(o)
	if err := co.Validate(); err != nil {
		var oe *claude.OptionError
		if errors.As(err, &oe) {
			return &InvalidArgumentError{Field: "options." + ProtoFieldName(oe.Field), Value: oe.Value, Reason: oe.Msg}
		}
		return err
	}
	return nil
}

// ProtoFieldName is the proto (snake_case) name of an SDK option's Go field
// name: MaxBudgetUSD → max_budget_usd. The SDK's option errors name Go
// fields; clients know the request's.
func ProtoFieldName(goName string) string {
	var b strings.Builder
	rs := []rune(goName)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			// A new word starts at an upper-case letter that follows a
			// lower-case one, or that precedes one (the end of an acronym).
			if i > 0 && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1]))) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// encodeOptions is the stored form of a session's options.
func encodeOptions(o *SessionOptions) ([]byte, error) {
	return protojson.MarshalOptions{UseProtoNames: true}.Marshal(o)
}

// decodeOptions reads stored options; fields a newer daemon stored are
// ignored.
func decodeOptions(sessionID string, raw []byte) (*SessionOptions, error) {
	o := new(SessionOptions)
	if len(raw) == 0 {
		return o, nil
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, o); err != nil {
		return nil, fmt.Errorf("daemon: session %s has unreadable options: %w", sessionID, err)
	}
	return o, nil
}
