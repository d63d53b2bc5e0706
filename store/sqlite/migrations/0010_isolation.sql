-- Version 9: sessions that stay out of each other's way (issue 41).
--
-- The budget status (a spend cap holds the session, store.StatusBudget)
-- and the session's git worktree (store.Worktree). SQLite cannot alter a
-- CHECK constraint: the table is rebuilt as in version 3, with foreign keys
-- off (migrate turns them off around the migrations).

CREATE TABLE sessions_new (
	pk                 INTEGER PRIMARY KEY,
	id                 TEXT    NOT NULL UNIQUE,
	claude_session_id  TEXT    NOT NULL DEFAULT '',
	cwd                TEXT    NOT NULL,
	model              TEXT    NOT NULL DEFAULT '',
	permission_mode    TEXT    NOT NULL DEFAULT '',
	status             TEXT    NOT NULL CHECK (status IN ('starting', 'running', 'idle', 'interrupted', 'closed', 'failed', 'suspended', 'queued', 'budget')),
	options            TEXT    NOT NULL DEFAULT '{}',
	budget_usd         REAL    NOT NULL DEFAULT 0,
	process            INTEGER NOT NULL DEFAULT 0,
	turns              INTEGER NOT NULL DEFAULT 0,
	cost_usd           REAL    NOT NULL DEFAULT 0,
	input_tokens       INTEGER NOT NULL DEFAULT 0,
	output_tokens      INTEGER NOT NULL DEFAULT 0,
	cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
	cache_write_tokens INTEGER NOT NULL DEFAULT 0,
	created_at         INTEGER NOT NULL,
	updated_at         INTEGER NOT NULL,
	error              TEXT    NOT NULL DEFAULT '',
	worker             TEXT    NOT NULL DEFAULT '',
	parent_id          TEXT    NOT NULL DEFAULT '',
	relay_worker       TEXT    NOT NULL DEFAULT '',
	relay_session      TEXT    NOT NULL DEFAULT '',
	relay_received     INTEGER NOT NULL DEFAULT 0,
	relay_sent         INTEGER NOT NULL DEFAULT 0,
	relay_since        INTEGER NOT NULL DEFAULT 0,
	relay_secret_hash  TEXT    NOT NULL DEFAULT '',
	-- The git worktree the session's CLI runs in ('' for none).
	worktree_path        TEXT    NOT NULL DEFAULT '',
	worktree_branch      TEXT    NOT NULL DEFAULT '',
	worktree_base_branch TEXT    NOT NULL DEFAULT '',
	worktree_base_commit TEXT    NOT NULL DEFAULT '',
	worktree_repo        TEXT    NOT NULL DEFAULT '',
	worktree_discarded   INTEGER NOT NULL DEFAULT 0
) STRICT;

INSERT INTO sessions_new (pk, id, claude_session_id, cwd, model, permission_mode, status, options, budget_usd,
	process, turns, cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
	created_at, updated_at, error, worker, parent_id, relay_worker, relay_session, relay_received, relay_sent,
	relay_since, relay_secret_hash)
SELECT pk, id, claude_session_id, cwd, model, permission_mode, status, options, budget_usd,
	process, turns, cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
	created_at, updated_at, error, worker, parent_id, relay_worker, relay_session, relay_received, relay_sent,
	relay_since, relay_secret_hash
FROM sessions;

DROP TABLE sessions;
ALTER TABLE sessions_new RENAME TO sessions;
CREATE INDEX sessions_status ON sessions (status);
CREATE INDEX sessions_claude_session_id ON sessions (claude_session_id);

-- Prompts sent to a session that a spend cap holds, in order: they run
-- once an approver releases it, and survive a restart meanwhile.
CREATE TABLE queued_prompts (
	session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	seq        INTEGER NOT NULL CHECK (seq > 0),
	text       TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (session_id, seq)
) STRICT;

-- Caps an approver raised: cap is 'session', 'directory' or 'daemon';
-- scope the session's id, the directory, or ''; day the local day
-- ('YYYY-MM-DD') a daily cap's raise holds for, '' for a session's.
CREATE TABLE budget_raises (
	cap        TEXT    NOT NULL CHECK (cap IN ('session', 'directory', 'daemon')),
	scope      TEXT    NOT NULL,
	day        TEXT    NOT NULL,
	limit_usd  REAL    NOT NULL CHECK (limit_usd > 0),
	raised_by  TEXT    NOT NULL DEFAULT '',
	raised_at  INTEGER NOT NULL,
	PRIMARY KEY (cap, scope, day)
) STRICT;

-- Spend since a time (a day's, for the daily caps), read as the daemon
-- starts and as a day begins.
CREATE INDEX usage_time ON usage (time);
