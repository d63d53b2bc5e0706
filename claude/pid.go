package claude

// PID returns the process id of the session's CLI when it runs as a local
// process (a ProcessTransport, or a Conn with a PID method that wraps one),
// 0 otherwise (a remote worker, an in-process stand-in).
func (s *Session) PID() int {
	if p, ok := s.conn.(interface{ PID() int }); ok {
		return p.PID()
	}
	return 0
}

// PID returns the CLI's process id.
func (p *process) PID() int {
	if p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
