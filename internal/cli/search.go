package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
)

// SearchCommand is "claudectl search": find words in every session's log.
type SearchCommand struct{ Env *Env }

// Name implements Command.
func (*SearchCommand) Name() string { return "search" }

// Summary implements Command.
func (*SearchCommand) Summary() string {
	return "find the sessions' prompts, replies and tool output holding some words"
}

const searchUsage = `Usage: claudectl search [flags] WORDS...

Finds, across every session the daemon keeps (closed ones included), the
prompts, Claude's replies, tool calls' inputs and tools' output that hold
every one of WORDS, and prints one match a line, newest first: the
session's id, the event's seq (claudectl attach --from-seq SEQ ID shows
it in its conversation), its time and the text around the match.

Words are matched whole and case-insensitively; every other character is
taken literally, as a separator (quotes, *, -, OR are no operators): at
most 200 bytes and 12 words. An event is found a moment after it happens
(the daemon indexes its log in the background).

With --json, each match is a JSON object on a line of its own:
session_id, seq, time, kind (prompt, reply, tool_input, tool_output),
snippet (the matched words between [[ and ]]) and session_title.
` + clientFlagsHelp

// searchJSON is one match in search --json.
type searchJSON struct {
	SessionID    string    `json:"session_id"`
	Seq          int64     `json:"seq"`
	Time         time.Time `json:"time"`
	Kind         string    `json:"kind"`
	Snippet      string    `json:"snippet"`
	SessionTitle string    `json:"session_title,omitempty"`
}

// Run implements Command.
func (c *SearchCommand) Run(ctx context.Context, args []string) error {
	env := c.Env.withDefaults()
	var cf clientFlags
	var asJSON bool
	var session string
	var limit int
	fs := newFlagSet("search")
	fs.BoolVar(&asJSON, "json", false, "print each match as a JSON object on a line")
	fs.StringVar(&session, "session", "", "search the session `ID` only")
	fs.IntVar(&limit, "limit", 50, "print at most `N` matches (1 to 200)")
	cf.register(fs)
	pos, help, err := parseClient(env, searchUsage, fs, args)
	if help || err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("missing WORDS: give the words to look for, e.g. claudectl search failing migration")
	}
	if limit < 1 || limit > 200 {
		return badValue("limit", fmt.Sprint(limit), "give 1 to 200")
	}
	dc, err := cf.dial(env)
	if err != nil {
		return err
	}
	defer dc.Close()
	if session != "" {
		if session, err = resolveSession(ctx, dc, session); err != nil {
			return err
		}
	}
	res, err := dc.sessions.Search(ctx, connect.NewRequest(&v1.SearchRequest{Query: strings.Join(pos, " "), Limit: int32(limit), SessionId: session}))
	if err != nil {
		switch connect.CodeOf(err) {
		case connect.CodeNotFound:
			if session != "" {
				return noSession(session)
			}
		case connect.CodeInvalidArgument:
			return usagef("%s", strings.TrimPrefix(connect.NewError(connect.CodeUnknown, err).Message(), "unknown: "))
		}
		return dc.explain(err, "searching")
	}
	if len(res.Msg.Hits) == 0 && !asJSON {
		return exitWith(ExitFailure, "no match for %q", strings.Join(pos, " "))
	}
	pal := colorFor(env, env.StdoutIsTerminal)
	for _, h := range res.Msg.Hits {
		if asJSON {
			var b strings.Builder
			for _, p := range h.Snippet {
				if p.Match {
					b.WriteString("[[" + p.Text + "]]")
				} else {
					b.WriteString(p.Text)
				}
			}
			line, err := json.Marshal(searchJSON{SessionID: h.SessionId, Seq: h.Seq, Time: h.Time.AsTime(), Kind: h.Kind,
				Snippet: b.String(), SessionTitle: h.SessionTitle})
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "%s\n", line)
			continue
		}
		var b strings.Builder
		for _, p := range h.Snippet {
			t := strings.Join(strings.Fields(p.Text), " ")
			if strings.HasPrefix(p.Text, " ") || strings.HasPrefix(p.Text, "\n") {
				t = " " + t
			}
			if strings.HasSuffix(p.Text, " ") || strings.HasSuffix(p.Text, "\n") {
				t += " "
			}
			if p.Match {
				t = pal.wrap(sgrBold, t)
			}
			b.WriteString(t)
		}
		fmt.Fprintf(env.Stdout, "%s  %d  %s  %s\n", h.SessionId, h.Seq, h.Time.AsTime().Local().Format("2006-01-02 15:04:05"),
			strings.TrimSpace(b.String()))
	}
	return nil
}
