-- Version 8: users, their API tokens (the SHA-256 of each, never the
-- token) and the audit trail of what clients did (issue 39). A revoked
-- token keeps its row, so that a request carrying it is told which it
-- was; its name is free again for a new token.
CREATE TABLE users (
	name       text   PRIMARY KEY,
	subject    text   NOT NULL DEFAULT '',
	email      text   NOT NULL DEFAULT '',
	groups     text[] NOT NULL DEFAULT '{}',
	created_at bigint NOT NULL
);

CREATE TABLE tokens (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name         text   NOT NULL,
	user_name    text   NOT NULL REFERENCES users (name),
	role         text   NOT NULL,
	dirs         text[] NOT NULL DEFAULT '{}',
	session_id   text   NOT NULL DEFAULT '',
	hash         bytea  NOT NULL UNIQUE,
	expires_at   bigint NOT NULL DEFAULT 0,
	created_by   text   NOT NULL DEFAULT '',
	created_at   bigint NOT NULL,
	last_used_at bigint NOT NULL DEFAULT 0,
	revoked_at   bigint NOT NULL DEFAULT 0,
	revoked_by   text   NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at = 0;

CREATE TABLE audit (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at          bigint NOT NULL,
	user_name   text   NOT NULL DEFAULT '',
	token_name  text   NOT NULL DEFAULT '',
	client_kind text   NOT NULL DEFAULT '',
	client_hint text   NOT NULL DEFAULT '',
	remote      text   NOT NULL DEFAULT '',
	action      text   NOT NULL,
	session_id  text   NOT NULL DEFAULT '',
	detail      text   NOT NULL DEFAULT '',
	outcome     text   NOT NULL DEFAULT ''
);
CREATE INDEX audit_session ON audit (session_id, id);
CREATE INDEX audit_user ON audit (user_name, id);
CREATE INDEX audit_at ON audit (at);
