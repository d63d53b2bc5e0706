-- Version 4: a session's log is stored in chunks of consecutive events
-- (see chunk.go for the encoding) instead of a row per event: the writer
-- inserts a chunk per session per commit, which is what lets one SQLite
-- writer keep up with a hundred streaming sessions. The events of version
-- 3 are converted (by the migration's Go step, convertEvents) and the old
-- table dropped.
--
-- Chunks are kept in arrival order (id), so that a commit appends to the
-- end of the table whatever the mix of sessions; the index finds the chunk
-- holding a session's seq: the first whose last_seq is not below it.
CREATE TABLE event_chunks (
	id        INTEGER PRIMARY KEY,
	session   INTEGER NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
	first_seq INTEGER NOT NULL CHECK (first_seq > 0),
	last_seq  INTEGER NOT NULL CHECK (last_seq >= first_seq),
	events    BLOB    NOT NULL
) STRICT;

CREATE UNIQUE INDEX event_chunks_session_last ON event_chunks (session, last_seq);
