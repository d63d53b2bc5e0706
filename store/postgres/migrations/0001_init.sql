-- Version 1: the schema of SQLite's version 4 (sessions, their event logs,
-- the usage ledger, permission rules, the decision audit trail) in
-- PostgreSQL's terms. Times are Unix nanoseconds (UTC), as in SQLite, so
-- both engines keep the same instants. Options, models and cumulative are
-- JSON kept as text: what was stored is what is read back, byte for byte.

CREATE TABLE sessions (
	pk                 bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- compact key for events
	id                 text    NOT NULL UNIQUE,
	claude_session_id  text    NOT NULL DEFAULT '',
	cwd                text    NOT NULL,
	model              text    NOT NULL DEFAULT '',
	permission_mode    text    NOT NULL DEFAULT '',
	status             text    NOT NULL CHECK (status IN ('starting', 'running', 'idle', 'interrupted', 'closed',
	                                                      'failed', 'suspended', 'queued')),
	options            text    NOT NULL DEFAULT '{}',
	budget_usd         double precision NOT NULL DEFAULT 0,
	process            bigint  NOT NULL DEFAULT 0,
	turns              bigint  NOT NULL DEFAULT 0,
	cost_usd           double precision NOT NULL DEFAULT 0,
	input_tokens       bigint  NOT NULL DEFAULT 0,
	output_tokens      bigint  NOT NULL DEFAULT 0,
	cache_read_tokens  bigint  NOT NULL DEFAULT 0,
	cache_write_tokens bigint  NOT NULL DEFAULT 0,
	created_at         bigint  NOT NULL,
	updated_at         bigint  NOT NULL,
	error              text    NOT NULL DEFAULT '',
	worker             text    NOT NULL DEFAULT '',
	parent_id          text    NOT NULL DEFAULT '',
	-- The seq of the session's last event. The writer adds a batch's count
	-- to it and numbers the batch's events from the old value, in the
	-- transaction that inserts them: the row lock this takes orders the
	-- writers of one session, so its numbering has no gap and never repeats.
	last_seq           bigint  NOT NULL DEFAULT 0 CHECK (last_seq >= 0)
);

CREATE INDEX sessions_status ON sessions (status);
CREATE INDEX sessions_created ON sessions (created_at DESC, id);

-- A session's log in chunks: one row holds the events first_seq..last_seq
-- of one session, in order, encoded as package store/internal/chunk says
-- (SQLite's format). The writer makes one chunk per session per batch, so
-- a batch of a thousand events of twenty sessions is twenty rows: a row
-- per event made the server's work per row (tuple, index entry, WAL
-- record) the bound of the daemon's throughput.
CREATE TABLE event_chunks (
	session   bigint NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
	first_seq bigint NOT NULL CHECK (first_seq > 0),
	last_seq  bigint NOT NULL CHECK (last_seq >= first_seq),
	events    bytea  NOT NULL,
	PRIMARY KEY (session, last_seq)
);

CREATE TABLE usage (
	session_id         text    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	turn               bigint  NOT NULL CHECK (turn > 0),
	process            bigint  NOT NULL,
	event_seq          bigint  NOT NULL DEFAULT 0,
	time               bigint  NOT NULL,
	subtype            text    NOT NULL DEFAULT '',
	is_error           boolean NOT NULL DEFAULT false,
	duration_ms        bigint  NOT NULL DEFAULT 0,
	cost_usd           double precision NOT NULL,
	input_tokens       bigint  NOT NULL,
	output_tokens      bigint  NOT NULL,
	cache_read_tokens  bigint  NOT NULL,
	cache_write_tokens bigint  NOT NULL,
	models             text    NOT NULL DEFAULT '{}',
	cumulative         text    NOT NULL,
	PRIMARY KEY (session_id, turn)
);

CREATE INDEX usage_process ON usage (session_id, process, turn);

-- Scope: global (both empty), project (project_dir), session (session_id).
CREATE TABLE rules (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	spec        text   NOT NULL,
	behavior    text   NOT NULL CHECK (behavior IN ('allow', 'deny', 'ask')),
	project_dir text   NOT NULL DEFAULT '',
	session_id  text   REFERENCES sessions (id) ON DELETE CASCADE, -- NULL unless session scope
	created_by  text   NOT NULL DEFAULT '',
	created_at  bigint NOT NULL
);

CREATE UNIQUE INDEX rules_unique ON rules (spec, behavior, project_dir, COALESCE(session_id, ''));
CREATE INDEX rules_session ON rules (session_id);

-- The audit trail. No foreign keys: it outlives the sessions and rules it names.
CREATE TABLE decisions (
	id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	session_id    text   NOT NULL,
	request_id    text   NOT NULL,
	tool_name     text   NOT NULL,
	input         bytea,
	behavior      text   NOT NULL CHECK (behavior IN ('allow', 'deny', 'withdrawn')),
	decided_by    text   NOT NULL,
	rule_id       bigint NOT NULL DEFAULT 0,
	rule_spec     text   NOT NULL DEFAULT '',
	message       text   NOT NULL DEFAULT '',
	updated_input bytea,
	requested_at  bigint NOT NULL,
	decided_at    bigint NOT NULL
);

CREATE INDEX decisions_session ON decisions (session_id, id);
