package daemon

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/relay"
	"github.com/claudectl/claudectl/store"
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
	WorkerRemote = "remote" // any remote worker (see the proto's SessionOptions.worker)
	// Any other value names a registered worker.
)

// workerSelector returns the registered worker o asks for, and whether it
// asks for one by name or labels (else: local, or "remote" alone).
func workerSelector(o *SessionOptions) (claude.WorkerSelector, bool) {
	w := o.GetWorker()
	sel := claude.WorkerSelector{Labels: o.GetWorkerLabels()}
	if w != "" && w != WorkerLocal && w != WorkerRemote {
		sel.Name = w
	}
	return sel, sel.Name != "" || len(sel.Labels) > 0
}

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
		SystemPrompt:           claude.SystemPromptFromFlags(o.GetSystemPrompt(), o.GetAppendSystemPrompt()),
		MaxTurns:               int(o.GetMaxTurns()),
		MaxBudgetUSD:           o.GetMaxBudgetUsd(),
		IncludePartialMessages: o.GetIncludePartialMessages(),
		ExtraArgs:              o.GetExtraArgs(),
	}
}

// SessionPolicy is what clients may ask of a session, set by the daemon's
// settings. The zero value is the least privilege: no extra CLI flags,
// no bypassPermissions, any existing directory.
type SessionPolicy struct {
	// ExtraArgs are the CLI flags (such as "--verbose") a session's
	// extra_args may hold, each as "--flag" or "--flag=value". None by
	// default: a flag such as --settings can make the CLI run any command.
	ExtraArgs []string
	// AllowBypassPermissions lets sessions use the bypassPermissions mode,
	// in which the CLI runs every tool without asking anyone.
	AllowBypassPermissions bool
	// Roots, when not empty, are the directories a session's cwd and
	// add_dirs must be inside.
	Roots []string
	// Limits are the most a local session's CLI may use, with everything
	// it starts (sessions.limits); a session may ask lower ones
	// (SessionOptions.limits), never higher. Zero fields: no limit.
	Limits claude.ResourceLimits
	// Sandbox, when set, is Claude Code's sandbox settings object that
	// every session's CLI runs with (EnforcedSandbox makes it from the
	// sessions.sandbox setting); nil for none. No client can weaken it.
	Sandbox json.RawMessage
}

// checkWorker checks where o asks its CLI to run: a worker name and labels
// that could be valid, a daemon that accepts remote workers, and, for a
// registered worker by name or labels, one that can take the session now
// (a *claude.NoWorkerError or *claude.WorkersBusyError if not).
func (d *Daemon) checkWorker(o *SessionOptions) error {
	w := o.GetWorker()
	if err := relay.ValidLabels(o.GetWorkerLabels()); err != nil {
		var re *relay.RegistrationError
		if errors.As(err, &re) {
			return &InvalidArgumentError{Field: "options.worker_labels", Value: re.Value, Reason: re.Reason}
		}
		return err
	}
	labels := o.GetWorkerLabels()
	switch {
	case (w == "" || w == WorkerLocal) && len(labels) == 0:
		return nil
	case w == WorkerLocal:
		return &InvalidArgumentError{Field: "options.worker_labels", Value: formatLabels(labels),
			Reason: `labels pick a remote worker: set worker to "remote" (or leave it empty), not "local"`}
	case w == "" || w == WorkerRemote:
	default:
		if err := relay.ValidName(w); err != nil {
			return &InvalidArgumentError{Field: "options.worker", Value: w,
				Reason: `must be "local", "remote" or a worker's name (letters, digits, '.', '_', '-'; claudectl workers lists them)`}
		}
	}
	if d.workers == nil {
		return &InvalidArgumentError{Field: "options.worker", Value: cmp.Or(w, WorkerRemote),
			Reason: "this daemon accepts no remote workers: start it with workers.token_file in settings.json"}
	}
	sel, _ := workerSelector(o)
	err := d.workers.CheckPlacement(sel)
	if errors.Is(err, claude.ErrWorkersBusy) {
		// Spares hold slots (pool.go): a session like theirs takes one,
		// and any other gets their slots.
		if ready, _ := d.SparesFor(o); ready > 0 {
			return nil
		}
		if d.dropRemoteSpares() {
			err = d.workers.CheckPlacement(sel)
		}
	}
	return err
}

func formatLabels(labels map[string]string) string {
	kv := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kv = append(kv, k+"="+labels[k])
	}
	return strings.Join(kv, ",")
}

// Limits on what one session's options may hold.
const (
	maxOptionString = 128 << 10 // one argument: Linux refuses longer ones
	maxOptionTotal  = 1 << 20   // all of them: the CLI's whole argv
)

// validateOptions checks o once, up front, before anything is stored: what
// the daemon itself needs (a working directory that exists, a known
// worker), what the settings allow (SessionPolicy), and everything the SDK
// checks, with the error naming the request field (options.max_turns) and,
// for what a setting forbids, the setting.
func (d *Daemon) validateOptions(o *SessionOptions) error {
	if err := checkStrings(o); err != nil {
		return err
	}
	if err := checkModel("options.model", o.GetModel()); err != nil {
		return err
	}
	if err := d.checkPolicy(o); err != nil {
		return err
	}
	if err := d.checkWorker(o); err != nil {
		return err
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

// maxModelBytes bounds a model name: the longest the CLI knows is a few
// dozen bytes, and every prompt's launch carries it on the command line.
const maxModelBytes = 256

// checkModel refuses a model name that no CLI could take: too long, or
// with control characters (a NUL cannot even be passed to it), so that a
// bad SetModel is refused up front rather than failing every later
// launch of the session. field is the request's name for it.
func checkModel(field, model string) error {
	if len(model) > maxModelBytes {
		return &InvalidArgumentError{Field: field, Value: clipValue(model),
			Reason: fmt.Sprintf("is %d bytes; a model name has at most %d", len(model), maxModelBytes)}
	}
	for _, r := range model {
		if r < 0x20 || r == 0x7f {
			return &InvalidArgumentError{Field: field, Value: clipValue(model),
				Reason: "must not contain control characters; give a model name such as \"claude-sonnet-4-5\" or an alias such as \"opus\""}
		}
	}
	return nil
}

// checkStrings refuses NUL bytes (an argv cannot hold them) and values too
// long for an argv, in every string of the options.
func checkStrings(o *SessionOptions) error {
	total := 0
	var err error
	check := func(name, v string) {
		total += len(v)
		switch {
		case err != nil:
		case strings.ContainsRune(v, 0):
			err = &InvalidArgumentError{Field: "options." + name, Value: clipValue(v), Reason: "must not contain NUL bytes"}
		case len(v) > maxOptionString:
			err = &InvalidArgumentError{Field: "options." + name, Value: clipValue(v),
				Reason: fmt.Sprintf("is %d bytes, more than the %d a command-line argument may have", len(v), maxOptionString)}
		}
	}
	o.ProtoReflect().Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if f.Kind() != protoreflect.StringKind {
			return true
		}
		if f.IsList() {
			for i := range v.List().Len() {
				check(fmt.Sprintf("%s[%d]", f.Name(), i), v.List().Get(i).String())
			}
		} else {
			check(string(f.Name()), v.String())
		}
		return err == nil
	})
	if err == nil && total > maxOptionTotal {
		err = &InvalidArgumentError{Field: "options", Value: fmt.Sprintf("%d bytes", total),
			Reason: fmt.Sprintf("the options are longer than the %d bytes a command line may have", maxOptionTotal)}
	}
	return err
}

// clipValue is v as an error quotes it: NULs shown as \0, and at most 80
// bytes, the first 77 (cut at a character's start) and "..." when longer,
// so that a client cannot make an error as long as what it sent. Clipping
// a clipped value changes nothing.
func clipValue(v string) string {
	v = strings.ReplaceAll(v, "\x00", `\0`)
	if len(v) > 80 {
		n := 77
		for n > 0 && !utf8.RuneStart(v[n]) {
			n--
		}
		return v[:n] + "..."
	}
	return v
}

// checkPolicy checks o against what the settings allow.
func (d *Daemon) checkPolicy(o *SessionOptions) error {
	p := &d.policy
	for i, arg := range o.GetExtraArgs() {
		name, _, _ := strings.Cut(arg, "=")
		if !strings.HasPrefix(name, "--") || !slices.Contains(p.ExtraArgs, name) {
			field := fmt.Sprintf("options.extra_args[%d]", i)
			if !strings.HasPrefix(name, "--") {
				return &InvalidArgumentError{Field: field, Value: clipValue(arg),
					Reason: `must be a flag, "--flag" or "--flag=value"`}
			}
			return &InvalidArgumentError{Field: field, Value: clipValue(arg),
				Reason: fmt.Sprintf("the flag %s is not allowed: add it to sessions.allowed_extra_args in the daemon's settings.json", name)}
		}
	}
	if err := p.checkSandboxArgs(o.GetExtraArgs()); err != nil {
		return err
	}
	if err := p.checkLimits(o.GetLimits()); err != nil {
		return err
	}
	if err := p.checkMode("options.permission_mode", o.GetPermissionMode()); err != nil {
		return err
	}
	if o.GetMaxBudgetUsd() != o.GetMaxBudgetUsd() || math.IsInf(o.GetMaxBudgetUsd(), 0) { // NaN, ±Inf
		return &InvalidArgumentError{Field: "options.max_budget_usd", Value: fmt.Sprint(o.GetMaxBudgetUsd()),
			Reason: "must be a number of dollars (0: no budget)"}
	}
	if o.GetCwd() != "" {
		if err := p.checkDir("options.cwd", o.GetCwd()); err != nil {
			return err
		}
	}
	for i, dir := range o.GetAddDirs() {
		if err := p.checkDir(fmt.Sprintf("options.add_dirs[%d]", i), dir); err != nil {
			return err
		}
	}
	return nil
}

func (p *SessionPolicy) checkMode(field, mode string) error {
	if mode == string(claude.PermissionBypassPermissions) && !p.AllowBypassPermissions {
		return &InvalidArgumentError{Field: field, Value: mode,
			Reason: "bypassPermissions runs every tool without asking: set sessions.allow_bypass_permissions in the daemon's settings.json to allow it"}
	}
	return nil
}

// checkDir: an absolute path of an existing directory, inside the roots
// when there are any.
func (p *SessionPolicy) checkDir(field, dir string) error {
	if !filepath.IsAbs(dir) {
		return &InvalidArgumentError{Field: field, Value: dir, Reason: "must be an absolute path"}
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return &InvalidArgumentError{Field: field, Value: dir, Reason: "no such directory on the daemon's machine"}
	case !fi.IsDir():
		return &InvalidArgumentError{Field: field, Value: dir, Reason: "not a directory"}
	}
	if len(p.Roots) == 0 {
		return nil
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = filepath.Clean(dir)
	}
	for _, root := range p.Roots {
		if r, err := filepath.EvalSymlinks(root); err == nil {
			root = r
		}
		if rel, err := filepath.Rel(root, real); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return nil
		}
	}
	return &InvalidArgumentError{Field: field, Value: dir,
		Reason: fmt.Sprintf("outside the directories sessions may use (%s): add it to sessions.allowed_roots in the daemon's settings.json", strings.Join(p.Roots, ", "))}
}

// checkLimits checks the limits a session asks for: numbers a cgroup can
// take, none above the daemon's.
func (p *SessionPolicy) checkLimits(l *v1.ResourceLimits) error {
	if l == nil {
		return nil
	}
	asked := claude.ResourceLimits{MemoryMax: l.GetMemoryMax(), CPUMax: l.GetCpuMax(), PIDsMax: l.GetPidsMax()}
	if err := asked.Validate(); err != nil {
		var oe *claude.OptionError
		if errors.As(err, &oe) {
			return &InvalidArgumentError{Field: "options.limits." + ProtoFieldName(oe.Field), Value: oe.Value,
				Reason: strings.Replace(oe.Msg, "0: no limit", "0: the daemon's", 1)}
		}
		return err
	}
	d := p.Limits
	switch {
	case d.MemoryMax > 0 && asked.MemoryMax > d.MemoryMax:
		return limitAbove("memory_max", fmt.Sprint(asked.MemoryMax), claude.FormatBytes(d.MemoryMax))
	case d.CPUMax > 0 && asked.CPUMax > d.CPUMax:
		return limitAbove("cpu_max", fmt.Sprint(asked.CPUMax), fmt.Sprint(d.CPUMax))
	case d.PIDsMax > 0 && asked.PIDsMax > d.PIDsMax:
		return limitAbove("pids_max", fmt.Sprint(asked.PIDsMax), fmt.Sprint(d.PIDsMax))
	}
	return nil
}

func limitAbove(field, value, cap string) error {
	return &InvalidArgumentError{Field: "options.limits." + field, Value: value,
		Reason: fmt.Sprintf("is above the daemon's sessions.limits.%s (%s): a session may ask lower limits, never higher", field, cap)}
}

// SessionLimits returns the resource limits a local session's CLI runs
// under: the daemon's, each lowered by what the session asked.
func (p *SessionPolicy) SessionLimits(o *SessionOptions) claude.ResourceLimits {
	lim, l := p.Limits, o.GetLimits()
	lim.MemoryMax = lower(lim.MemoryMax, l.GetMemoryMax())
	lim.CPUMax = lower(lim.CPUMax, l.GetCpuMax())
	lim.PIDsMax = lower(lim.PIDsMax, l.GetPidsMax())
	return lim
}

// lower is the lower of a limit and what a session asked, 0 being none.
func lower[T int64 | float64](cap, asked T) T {
	if asked > 0 && (cap == 0 || asked < cap) {
		return asked
	}
	return cap
}

// Limits returns the resource limits session s's CLI runs under: the
// daemon's lowered by what it asked, for a local session; none for one on
// a remote worker (its worker's CLIs are not the daemon's to cap).
func (d *Daemon) Limits(s *store.Session) claude.ResourceLimits {
	if s.Worker != "" {
		return claude.ResourceLimits{}
	}
	if !bytes.Contains(s.Options, []byte(`"limits"`)) { // most sessions: no options to decode
		return d.policy.Limits
	}
	o, err := decodeOptions(s.ID, s.Options)
	if err != nil {
		return d.policy.Limits
	}
	return d.policy.SessionLimits(o)
}
