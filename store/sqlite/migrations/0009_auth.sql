-- Version 9: users, their API tokens (the SHA-256 of each, never the
-- token) and the audit trail of what clients did (issue 39). A revoked
-- token keeps its row, so that a request carrying it is told which it
-- was; its name is free again for a new token.
CREATE TABLE users (
	name       TEXT    PRIMARY KEY,
	subject    TEXT    NOT NULL DEFAULT '',
	email      TEXT    NOT NULL DEFAULT '',
	groups     TEXT    NOT NULL DEFAULT '[]', -- JSON array
	created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE tokens (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	name         TEXT    NOT NULL,
	user_name    TEXT    NOT NULL REFERENCES users (name),
	role         TEXT    NOT NULL,
	dirs         TEXT    NOT NULL DEFAULT '[]', -- JSON array
	session_id   TEXT    NOT NULL DEFAULT '',
	hash         BLOB    NOT NULL UNIQUE,
	expires_at   INTEGER NOT NULL DEFAULT 0,
	created_by   TEXT    NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL,
	last_used_at INTEGER NOT NULL DEFAULT 0,
	revoked_at   INTEGER NOT NULL DEFAULT 0,
	revoked_by   TEXT    NOT NULL DEFAULT ''
) STRICT;
CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at = 0;

CREATE TABLE audit (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	at          INTEGER NOT NULL,
	user_name   TEXT    NOT NULL DEFAULT '',
	token_name  TEXT    NOT NULL DEFAULT '',
	client_kind TEXT    NOT NULL DEFAULT '',
	client_hint TEXT    NOT NULL DEFAULT '',
	remote      TEXT    NOT NULL DEFAULT '',
	action      TEXT    NOT NULL,
	session_id  TEXT    NOT NULL DEFAULT '',
	detail      TEXT    NOT NULL DEFAULT '',
	outcome     TEXT    NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX audit_session ON audit (session_id, id);
CREATE INDEX audit_user ON audit (user_name, id);
CREATE INDEX audit_at ON audit (at);
