-- Version 1: sessions, their event logs, the usage ledger, permission rules
-- and the decision audit trail. Times are Unix nanoseconds (UTC).

CREATE TABLE sessions (
	pk                 INTEGER PRIMARY KEY,           -- compact key for events
	id                 TEXT    NOT NULL UNIQUE,
	claude_session_id  TEXT    NOT NULL DEFAULT '',
	cwd                TEXT    NOT NULL,
	model              TEXT    NOT NULL DEFAULT '',
	permission_mode    TEXT    NOT NULL DEFAULT '',
	status             TEXT    NOT NULL CHECK (status IN ('starting', 'running', 'idle', 'interrupted', 'closed', 'failed')),
	options            TEXT    NOT NULL DEFAULT '{}', -- launch options, JSON
	budget_usd         REAL    NOT NULL DEFAULT 0,    -- 0: no budget
	process            INTEGER NOT NULL DEFAULT 0,    -- CLI process generation
	turns              INTEGER NOT NULL DEFAULT 0,    -- totals of the usage ledger
	cost_usd           REAL    NOT NULL DEFAULT 0,
	input_tokens       INTEGER NOT NULL DEFAULT 0,
	output_tokens      INTEGER NOT NULL DEFAULT 0,
	cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
	cache_write_tokens INTEGER NOT NULL DEFAULT 0,
	created_at         INTEGER NOT NULL,
	updated_at         INTEGER NOT NULL
) STRICT;

CREATE INDEX sessions_status ON sessions (status);

-- One row per line. seq is gap-free per session: the store's single writer
-- assigns last+1 inside the transaction that inserts the row. Rows are kept
-- in arrival order (id), so that a commit appends to the end of the table
-- whatever the mix of sessions; the index finds a session's events.
CREATE TABLE events (
	id            INTEGER PRIMARY KEY,
	session       INTEGER NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
	seq           INTEGER NOT NULL CHECK (seq > 0),
	time          INTEGER NOT NULL,
	direction     INTEGER NOT NULL CHECK (direction BETWEEN 1 AND 3), -- from CLI, to CLI, from daemon
	type          TEXT    NOT NULL,
	subtype       TEXT    NOT NULL DEFAULT '',
	raw           BLOB    NOT NULL,  -- the line, truncated past the payload limit
	original_size INTEGER NOT NULL   -- its length before truncation
) STRICT;

CREATE UNIQUE INDEX events_session_seq ON events (session, seq);

-- One row per result line. cumulative is the process's running total as the
-- CLI reported it (JSON), kept to compute the next turn's share.
CREATE TABLE usage (
	session_id         TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	turn               INTEGER NOT NULL CHECK (turn > 0),
	process            INTEGER NOT NULL,
	event_seq          INTEGER NOT NULL DEFAULT 0,
	time               INTEGER NOT NULL,
	subtype            TEXT    NOT NULL DEFAULT '',
	is_error           INTEGER NOT NULL DEFAULT 0,
	duration_ms        INTEGER NOT NULL DEFAULT 0,
	cost_usd           REAL    NOT NULL,
	input_tokens       INTEGER NOT NULL,
	output_tokens      INTEGER NOT NULL,
	cache_read_tokens  INTEGER NOT NULL,
	cache_write_tokens INTEGER NOT NULL,
	models             TEXT    NOT NULL DEFAULT '{}', -- per-model deltas, JSON
	cumulative         TEXT    NOT NULL,
	PRIMARY KEY (session_id, turn)
) STRICT;

CREATE INDEX usage_process ON usage (session_id, process, turn);

-- Scope: global (both empty), project (project_dir), session (session_id).
CREATE TABLE rules (
	id          INTEGER PRIMARY KEY,
	spec        TEXT    NOT NULL,
	behavior    TEXT    NOT NULL CHECK (behavior IN ('allow', 'deny', 'ask')),
	project_dir TEXT    NOT NULL DEFAULT '',
	session_id  TEXT    REFERENCES sessions (id) ON DELETE CASCADE, -- NULL unless session scope
	created_by  TEXT    NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX rules_unique ON rules (spec, behavior, project_dir, COALESCE(session_id, ''));
CREATE INDEX rules_session ON rules (session_id);

-- The audit trail. No foreign keys: it outlives the sessions and rules it names.
CREATE TABLE decisions (
	id            INTEGER PRIMARY KEY,
	session_id    TEXT    NOT NULL,
	request_id    TEXT    NOT NULL,
	tool_name     TEXT    NOT NULL,
	input         BLOB,
	behavior      TEXT    NOT NULL CHECK (behavior IN ('allow', 'deny', 'withdrawn')),
	decided_by    TEXT    NOT NULL,
	rule_id       INTEGER NOT NULL DEFAULT 0,
	rule_spec     TEXT    NOT NULL DEFAULT '',
	message       TEXT    NOT NULL DEFAULT '',
	updated_input BLOB,
	requested_at  INTEGER NOT NULL,
	decided_at    INTEGER NOT NULL
) STRICT;

CREATE INDEX decisions_session ON decisions (session_id, id);
