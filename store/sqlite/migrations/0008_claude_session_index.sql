-- Version 8: sessions found by their CLI conversation (SessionFilter.ClaudeSessionID):
-- the daemon checks, when a CLI reports its conversation, that no other
-- session holds it.
CREATE INDEX sessions_claude_session_id ON sessions (claude_session_id);
