package daemon

import "errors"

// ErrTerminalSession is wrapped by the error of a call that drives a
// session started by hand in a terminal (a prompt, an interrupt, a model,
// a resume): such a session is driven from its terminal; the daemon only
// answers its permission requests.
var ErrTerminalSession = errors.New("the session runs in a terminal")
