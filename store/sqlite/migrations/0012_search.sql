-- Version 9: search across every session's log, and sessions' titles.
--
-- search_docs holds the text of each indexed event (a prompt, Claude's
-- text, a tool call's input or output: store/internal/searchtext), and
-- search_fts, an FTS5 index over it (external content: the text is kept
-- once), kept in step by the triggers below; a session's documents go
-- with it (ON DELETE CASCADE, whose deletes fire the trigger). The
-- indexer (search.go) fills both in the background from the chunks in
-- search_queue, so that the event writer never waits for it; this
-- migration's Go step indexes the logs already stored.
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

-- One document an event: indexing a chunk again adds nothing.
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

-- The chunks waiting for the indexer: the writer queues, in the
-- transaction that inserts it, each chunk holding an event the index may
-- take (a prompt, a message, a title: searchtext.Indexable), so that the
-- indexer reads back only those (a streaming reply's thousand partial
-- lines are never read again) and none is missed or read twice; the
-- indexer removes them from the queue as it indexes them.
CREATE TABLE search_queue (
	chunk INTEGER PRIMARY KEY REFERENCES event_chunks (id) ON DELETE CASCADE
) STRICT;

-- The usage ledger by time, for the activity plots (store.UsageSince), is
-- the isolation migration's usage_time, made for the spend caps.
