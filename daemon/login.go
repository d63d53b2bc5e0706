package daemon

import (
	"cmp"
	"strings"
	"sync/atomic"

	"github.com/claudectl/claudectl/claude"
	"github.com/claudectl/claudectl/internal/credentials"
)

// A turn that fails because its CLI has no credentials the API accepts
// (credentials.Refused: "Not logged in · Please run /login", or a key the
// API refused) gets an error event that says what to do (ErrorReport.Hint):
// where the key goes for the daemon's CLIs, or for the worker's. Clients
// show it as they get it: run --server and attach after the error, the web
// page under it. The daemon also keeps whether its local CLIs lack
// credentials, from serve's look at start (Options.NoCredentials) and then
// from the turns themselves (refused until one gets through), so that Send
// warns its client before the prompt's turn fails the same way
// (LoginHint).

// loginState is what the daemon knows of its local CLIs' credentials.
type loginState struct {
	hint    string      // what to do, for the daemon's local CLIs
	refused atomic.Bool // the last local turn that reached for the API lacked credentials
}

// loginHint is what to do about session a's CLI lacking credentials.
func (a *actor) loginHint() string {
	if a.remote() {
		return credentials.Hint(credentials.Where{Worker: cmp.Or(a.d.workerOf(a.id), "(unknown)")})
	}
	return a.d.login.hint
}

// observeLogin notes what a line of session a's CLI says of its
// credentials: a main-thread reply refused for lack of them, or a result
// that is not an error (the API took the turn). Remote sessions have the
// worker's credentials, which say nothing of the daemon's.
func (a *actor) observeLogin(m claude.Message) {
	if a.remote() {
		return
	}
	switch m := m.(type) {
	case *claude.AssistantMessage:
		if m.ParentToolUseID == "" && credentials.Refused(m) {
			a.d.login.refused.Store(true)
		}
	case *claude.ResultMessage:
		if !m.IsError {
			a.d.login.refused.Store(false)
		}
	}
}

// LoginHint says what to do before a prompt sent to session id can get
// through, when the daemon expects its turn to fail for lack of
// credentials: its CLI is the daemon's own, and the daemon found none as
// it started or the last of its turns was refused for that (none got
// through since). "" otherwise.
func (d *Daemon) LoginHint(id string) string {
	if !d.login.refused.Load() {
		return ""
	}
	d.mu.Lock()
	a := d.actors[id]
	d.mu.Unlock()
	if a == nil || a.remote() {
		return ""
	}
	return d.login.hint
}

// apiFailure says in words that a reply of the model failed at the API:
// its error kind, and the CLI's text for it ("Not logged in · Please run
// /login") when the reply holds nothing else.
func apiFailure(m *claude.AssistantMessage) string {
	msg := "the API call failed (" + m.Error + ")"
	if text := strings.TrimSpace(m.Message.Content.Text()); text != "" && len(m.Message.Content) == 1 {
		msg += ": " + text
	}
	return msg
}
