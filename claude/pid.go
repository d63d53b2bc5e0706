package claude

// PID returns the process id of the session's CLI when it runs as a local
// process (a ProcessTransport), 0 otherwise (a remote worker, an
// in-process stand-in).
func (s *Session) PID() int {
	if p, ok := s.conn.(interface{ pid() int }); ok {
		return p.pid()
	}
	return 0
}

func (p *process) pid() int {
	if p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
