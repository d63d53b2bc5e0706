-- Version 9: search across every session's log, and sessions' titles.
--
-- search_docs holds the text of each indexed event (a prompt, Claude's
-- text, a tool call's input or output: store/internal/searchtext), and
-- search_fts, an FTS5 index over it (external content: the text is kept
-- once), kept in step by the triggers below; a session's documents go
-- with it (ON DELETE CASCADE, whose deletes fire the trigger). The
-- indexer (search.go) fills both in the background from the chunks after
-- search_state.last_chunk, so that the event writer never waits for it;
-- this migration's Go step indexes the logs already stored.
--
-- title is the last title Claude Code printed (system/session_title_changed)
-- and first_prompt the session's first prompt, set by the indexer too.
ALTER TABLE sessions ADD COLUMN title        TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN first_prompt TEXT NOT NULL DEFAULT '';

CREATE TABLE search_docs (
	id      INTEGER PRIMARY KEY,
	session INTEGER NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
	seq     INTEGER NOT NULL,
	time    INTEGER NOT NULL,
	kind    TEXT    NOT NULL,
	text    TEXT    NOT NULL
) STRICT;

-- One document an event: indexing a chunk again (see event_chunks_gone)
-- adds nothing.
CREATE UNIQUE INDEX search_docs_event ON search_docs (session, seq);

-- unicode61 takes runs of letters and digits as words (store.SearchTerms
-- splits queries the same way), case- and diacritic-insensitive.
CREATE VIRTUAL TABLE search_fts USING fts5 (
	text,
	content = 'search_docs',
	content_rowid = 'id',
	tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER search_docs_insert AFTER INSERT ON search_docs BEGIN
	INSERT INTO search_fts (rowid, text) VALUES (new.id, new.text);
END;

CREATE TRIGGER search_docs_delete AFTER DELETE ON search_docs BEGIN
	INSERT INTO search_fts (search_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;

-- The id of the last event chunk indexed: chunks are only ever inserted,
-- by one writer, in increasing id. Once a session is deleted, SQLite may
-- give the ids of its chunks (when they were the last) to new ones: the
-- trigger takes the mark back below them, so that those are indexed.
CREATE TABLE search_state (
	one        INTEGER PRIMARY KEY CHECK (one = 1),
	last_chunk INTEGER NOT NULL
) STRICT;

INSERT INTO search_state (one, last_chunk) VALUES (1, 0);

CREATE TRIGGER event_chunks_gone AFTER DELETE ON event_chunks
WHEN old.id <= (SELECT last_chunk FROM search_state) BEGIN
	UPDATE search_state SET last_chunk = old.id - 1 WHERE last_chunk > old.id - 1;
END;

-- The usage ledger by time, for the activity plots (store.UsageSince), is
-- the isolation migration's usage_time, made for the spend caps.
