-- Version 8: search across every session's log, and sessions' titles (as
-- SQLite's version 9).
--
-- search_docs holds the text of each indexed event (a prompt, Claude's
-- text, a tool call's input or output: store/internal/searchtext) with its
-- words as a tsvector (the 'simple' configuration over the words
-- store.SearchTerms splits, so that both engines find the same words),
-- under a GIN index. The indexer (search.go) fills it in the background,
-- one session at a time, from the chunks after search_progress.indexed_seq;
-- the event writer never waits for it. Each session's row of
-- search_progress is locked (FOR UPDATE SKIP LOCKED) by the daemon that
-- indexes it, so that several daemons sharing the database share the
-- work. The logs already stored are indexed by the indexer after this
-- migration, from seq 0 (the chunks' encoding is read in Go).
--
-- search_progress also holds each session's title (the last
-- system/session_title_changed) and first prompt: kept off the sessions
-- row, which every commit of the writer locks.
CREATE TABLE search_progress (
	session      bigint NOT NULL PRIMARY KEY REFERENCES sessions (pk) ON DELETE CASCADE,
	indexed_seq  bigint NOT NULL DEFAULT 0,
	title        text   NOT NULL DEFAULT '',
	first_prompt text   NOT NULL DEFAULT ''
);

CREATE TABLE search_docs (
	session bigint   NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
	seq     bigint   NOT NULL,
	time    bigint   NOT NULL,
	kind    text     NOT NULL,
	text    text     NOT NULL,
	words   tsvector NOT NULL,
	PRIMARY KEY (session, seq)
);

CREATE INDEX search_docs_words ON search_docs USING gin (words);
CREATE INDEX search_docs_time ON search_docs (time DESC);

-- The usage ledger by time, for the activity plots (store.UsageSince), is
-- the isolation migration's usage_time, made for the spend caps.
