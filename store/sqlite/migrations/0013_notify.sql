-- Version 13: reaching people (issue 40). The devices subscribed to Web
-- Push with their owners, the one-use capabilities their notifications'
-- actions carry (the SHA-256 of each), the daemon's VAPID key, the log of
-- deliveries to webhooks and devices, and, for each decision, the routing
-- rule that said who was asked and who allowed it under a two-person rule.
CREATE TABLE push_subscriptions (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	user_name    TEXT    NOT NULL,
	token_name   TEXT    NOT NULL DEFAULT '',
	endpoint     TEXT    NOT NULL UNIQUE,
	p256dh       BLOB    NOT NULL,
	auth         BLOB    NOT NULL,
	kinds        TEXT    NOT NULL DEFAULT '[]', -- JSON array
	device       TEXT    NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL,
	last_push_at INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE push_capabilities (
	hash            BLOB    PRIMARY KEY,
	request_id      TEXT    NOT NULL,
	session_id      TEXT    NOT NULL DEFAULT '',
	subscription_id INTEGER NOT NULL REFERENCES push_subscriptions (id) ON DELETE CASCADE,
	expires_at      INTEGER NOT NULL,
	used_at         INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX push_capabilities_expiry ON push_capabilities (expires_at);

CREATE TABLE notify_keys (
	name TEXT PRIMARY KEY,
	key  BLOB NOT NULL
) STRICT;

CREATE TABLE deliveries (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	at          INTEGER NOT NULL,
	target      TEXT    NOT NULL,
	event       TEXT    NOT NULL,
	session_id  TEXT    NOT NULL DEFAULT '',
	request_id  TEXT    NOT NULL DEFAULT '',
	status      TEXT    NOT NULL,
	attempts    INTEGER NOT NULL DEFAULT 0,
	http_status INTEGER NOT NULL DEFAULT 0,
	error       TEXT    NOT NULL DEFAULT '',
	latency_ns  INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX deliveries_target ON deliveries (target, id);

ALTER TABLE decisions ADD COLUMN route TEXT NOT NULL DEFAULT '';
ALTER TABLE decisions ADD COLUMN approved_by TEXT NOT NULL DEFAULT '[]'; -- JSON array
