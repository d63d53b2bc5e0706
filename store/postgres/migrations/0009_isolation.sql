-- Version 8: sessions that stay out of each other's way (issue 41), as
-- SQLite's version 9: the budget status (a spend cap holds the session),
-- the session's git worktree, the prompts a held session keeps, the caps
-- an approver raised, and the ledger found by time (a day's spend).

ALTER TABLE sessions DROP CONSTRAINT sessions_status_check;
ALTER TABLE sessions ADD CONSTRAINT sessions_status_check CHECK (status IN ('starting', 'running', 'idle',
	'interrupted', 'closed', 'failed', 'suspended', 'queued', 'budget'));

ALTER TABLE sessions ADD COLUMN worktree_path        text    NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN worktree_branch      text    NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN worktree_base_branch text    NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN worktree_base_commit text    NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN worktree_repo        text    NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN worktree_discarded   boolean NOT NULL DEFAULT false;

CREATE TABLE queued_prompts (
	session_id text   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
	seq        bigint NOT NULL CHECK (seq > 0),
	text       text   NOT NULL,
	created_at bigint NOT NULL,
	PRIMARY KEY (session_id, seq)
);

CREATE TABLE budget_raises (
	cap        text   NOT NULL CHECK (cap IN ('session', 'directory', 'daemon')),
	scope      text   NOT NULL,
	day        text   NOT NULL,
	limit_usd  double precision NOT NULL CHECK (limit_usd > 0),
	raised_by  text   NOT NULL DEFAULT '',
	raised_at  bigint NOT NULL,
	PRIMARY KEY (cap, scope, day)
);

CREATE INDEX usage_time ON usage (time);
