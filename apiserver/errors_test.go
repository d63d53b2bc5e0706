package apiserver_test

import (
	"regexp"
	"testing"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/apiserver"
)

func TestClientMessage(t *testing.T) {
	for in, want := range map[string]string{
		`daemon: no session "x" (claudectl sessions lists them)`:                             `no session "x" (claudectl sessions lists them)`,
		"daemon: creating session: sqlite: append: disk I/O error":                           "creating session: append: disk I/O error",
		"daemon: session is not running: session S is closed":                                "session is not running: session S is closed",
		"claude: session ended: claude: CLI exited with code 1":                              "session ended: CLI exited with code 1",
		"daemon: creating session: sqlite: CreateSession: the store cannot write: disk full": "creating session: the store cannot write: disk full",
		"postgres: AddRule: x":       "x",
		"sqlite: GetSession S: gone": "GetSession S: gone", // a call with its argument stays: "S: gone" would say less
		"daemon: Note: x":            "Note: x",            // only the stores' calls
		"daemon: sqlite: x":          "x",
		"store: a\ndaemon: b":        "a\nb",
		`daemon: invalid options.cwd "daemon: x": must be absolute`: `invalid options.cwd "daemon: x": must be absolute`, // a client's value, whole
		`daemon: invalid model "a\"b: daemon: c": bad`:              `invalid model "a\"b: daemon: c": bad`,
		"plain words: with a colon":                                 "plain words: with a colon",
		"daemonic: not a package":                                   "daemonic: not a package",
		"the daemon: said so":                                       "the daemon: said so",
		"":                                                          "",
	} {
		if got := apiserver.ClientMessage(in); got != want {
			t.Errorf("ClientMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

// internalName matches an internal package's name starting a message or a
// part of one.
var internalName = regexp.MustCompile(`(^|: |\n)(daemon|store|sqlite|postgres|permission|claude|relay|jsonl|apiserver|api): `)

// TestErrorsInClientWords goes over the RPCs' common errors (an unknown
// session for each RPC that takes one, a session in the wrong state, a
// bad argument, an unknown request or rule): none names an internal
// package. Subscribe and Send, among others, said "daemon: no session …".
func TestErrorsInClientWords(t *testing.T) {
	c := start(t)
	ctx := c.ctx
	const noSession = `no session "nope" (claudectl sessions lists them)`
	check := func(name string, err error, want string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", name)
			return
		}
		msg := connectMessage(err)
		if internalName.MatchString(msg) || connect.CodeOf(err) == connect.CodeUnknown || msg == "" {
			t.Errorf("%s: %v; names an internal package", name, err)
		}
		if want != "" && msg != want {
			t.Errorf("%s: %q, want %q", name, msg, want)
		}
	}
	// An unknown session, for every RPC that takes one.
	_, err := c.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: "nope"}))
	check("GetSession", err, noSession)
	_, err = c.sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: "nope", Text: "hi"}))
	check("Send", err, noSession)
	_, err = c.sessions.Interrupt(ctx, connect.NewRequest(&v1.InterruptRequest{SessionId: "nope"}))
	check("Interrupt", err, noSession)
	_, err = c.sessions.SetModel(ctx, connect.NewRequest(&v1.SetModelRequest{SessionId: "nope", Model: "opus"}))
	check("SetModel", err, noSession)
	_, err = c.sessions.SetPermissionMode(ctx, connect.NewRequest(&v1.SetPermissionModeRequest{SessionId: "nope", Mode: "default"}))
	check("SetPermissionMode", err, noSession)
	_, err = c.sessions.CloseSession(ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: "nope"}))
	check("CloseSession", err, noSession)
	_, err = c.sessions.ResumeSession(ctx, connect.NewRequest(&v1.ResumeSessionRequest{SessionId: "nope"}))
	check("ResumeSession", err, noSession)
	_, err = c.sessions.ForkSession(ctx, connect.NewRequest(&v1.ForkSessionRequest{SessionId: "nope"}))
	check("ForkSession", err, noSession)
	err = drain(c.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: "nope"})))
	check("Subscribe", err, noSession)
	_, err = c.perms.ListPending(ctx, connect.NewRequest(&v1.ListPendingRequest{SessionId: "nope"}))
	check("ListPending", err, noSession)
	_, err = c.perms.ListDecisions(ctx, connect.NewRequest(&v1.ListDecisionsRequest{SessionId: "nope"}))
	check("ListDecisions", err, noSession)
	err = drain(c.perms.WatchPending(ctx, connect.NewRequest(&v1.WatchPendingRequest{SessionId: "nope"})))
	check("WatchPending", err, noSession)
	_, err = c.perms.AddRule(ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{Pattern: "Bash(ls:*)",
		Behavior: v1.Behavior_BEHAVIOR_ALLOW, Scope: v1.RuleScope_RULE_SCOPE_SESSION, ScopeValue: "nope"}}))
	check("AddRule for a session", err, noSession)

	// Other ids and arguments.
	_, err = c.perms.Decide(ctx, connect.NewRequest(&v1.DecideRequest{RequestId: "nope", Behavior: v1.Behavior_BEHAVIOR_ALLOW}))
	check("Decide", err, "")
	_, err = c.perms.RemoveRule(ctx, connect.NewRequest(&v1.RemoveRuleRequest{RuleId: "12345"}))
	check("RemoveRule", err, "")
	_, err = c.perms.AddRule(ctx, connect.NewRequest(&v1.AddRuleRequest{Rule: &v1.Rule{Pattern: "Bash(", Behavior: v1.Behavior_BEHAVIOR_ALLOW}}))
	check("AddRule bad pattern", err, "")
	_, err = c.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: "relative"}}))
	check("CreateSession relative cwd", err, `invalid options.cwd "relative": must be an absolute path`)
	_, err = c.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: t.TempDir(), PermissionMode: "x"}}))
	check("CreateSession permission_mode", err, "")

	// A session in the wrong state: closed, its CLI never having started a
	// conversation.
	s, err := c.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{Options: &v1.SessionOptions{Cwd: t.TempDir()}}))
	if err != nil {
		t.Fatal(err)
	}
	id := s.Msg.Session.Id
	_, err = c.sessions.ResumeSession(ctx, connect.NewRequest(&v1.ResumeSessionRequest{SessionId: id}))
	check("ResumeSession of a live session", err, "")
	if _, err := c.sessions.CloseSession(ctx, connect.NewRequest(&v1.CloseSessionRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	_, err = c.sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: "hi"}))
	check("Send to a closed session", err, "")
	_, err = c.sessions.Interrupt(ctx, connect.NewRequest(&v1.InterruptRequest{SessionId: id}))
	check("Interrupt of a closed session", err, "session is not running: session "+id+" is closed")
	_, err = c.sessions.SetModel(ctx, connect.NewRequest(&v1.SetModelRequest{SessionId: id, Model: "opus"}))
	check("SetModel of a closed session", err, "")
	_, err = c.sessions.SetPermissionMode(ctx, connect.NewRequest(&v1.SetPermissionModeRequest{SessionId: id, Mode: "default"}))
	check("SetPermissionMode of a closed session", err, "")
	_, err = c.sessions.ResumeSession(ctx, connect.NewRequest(&v1.ResumeSessionRequest{SessionId: id}))
	check("ResumeSession of a closed session", err, "")
	_, err = c.sessions.ForkSession(ctx, connect.NewRequest(&v1.ForkSessionRequest{SessionId: id}))
	check("ForkSession of a closed session", err, "")
}

// drain receives a stream to its end, and returns its error.
func drain[T any](st *connect.ServerStreamForClient[T], err error) error {
	if err != nil {
		return err
	}
	defer st.Close()
	for st.Receive() {
	}
	return st.Err()
}
