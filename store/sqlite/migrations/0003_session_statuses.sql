-- Version 3: two more session statuses, suspended (the daemon closed its
-- CLI; the next prompt resumes it) and queued (it waits for a slot to
-- start its CLI). SQLite cannot alter a CHECK constraint: the table is
-- rebuilt (https://sqlite.org/lang_altertable.html#otheralter), with
-- foreign keys off (migrate turns them off around the migrations).

CREATE TABLE sessions_new (
	pk                 INTEGER PRIMARY KEY,
	id                 TEXT    NOT NULL UNIQUE,
	claude_session_id  TEXT    NOT NULL DEFAULT '',
	cwd                TEXT    NOT NULL,
	model              TEXT    NOT NULL DEFAULT '',
	permission_mode    TEXT    NOT NULL DEFAULT '',
	status             TEXT    NOT NULL CHECK (status IN ('starting', 'running', 'idle', 'interrupted', 'closed', 'failed', 'suspended', 'queued')),
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
	parent_id          TEXT    NOT NULL DEFAULT ''
) STRICT;

INSERT INTO sessions_new (pk, id, claude_session_id, cwd, model, permission_mode, status, options, budget_usd,
	process, turns, cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
	created_at, updated_at, error, worker, parent_id)
SELECT pk, id, claude_session_id, cwd, model, permission_mode, status, options, budget_usd,
	process, turns, cost_usd, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
	created_at, updated_at, error, worker, parent_id
FROM sessions;

DROP TABLE sessions;
ALTER TABLE sessions_new RENAME TO sessions;
CREATE INDEX sessions_status ON sessions (status);
