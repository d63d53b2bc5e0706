-- Version 12: reaching people (issue 40). The devices subscribed to Web
-- Push with their owners, the one-use capabilities their notifications'
-- actions carry (the SHA-256 of each), the daemons' VAPID key (one for
-- all: the devices subscribed with its public half), the log of
-- deliveries to webhooks and devices, and, for each decision, the routing
-- rule that said who was asked and who allowed it under a two-person rule.
CREATE TABLE push_subscriptions (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	user_name    text   NOT NULL,
	token_name   text   NOT NULL DEFAULT '',
	endpoint     text   NOT NULL UNIQUE,
	p256dh       bytea  NOT NULL,
	auth         bytea  NOT NULL,
	kinds        text[] NOT NULL DEFAULT '{}',
	device       text   NOT NULL DEFAULT '',
	created_at   bigint NOT NULL,
	last_push_at bigint NOT NULL DEFAULT 0
);

CREATE TABLE push_capabilities (
	hash            bytea  PRIMARY KEY,
	request_id      text   NOT NULL,
	session_id      text   NOT NULL DEFAULT '',
	subscription_id bigint NOT NULL REFERENCES push_subscriptions (id) ON DELETE CASCADE,
	expires_at      bigint NOT NULL,
	used_at         bigint NOT NULL DEFAULT 0
);
CREATE INDEX push_capabilities_expiry ON push_capabilities (expires_at);
CREATE INDEX push_capabilities_subscription ON push_capabilities (subscription_id);

CREATE TABLE notify_keys (
	name text  PRIMARY KEY,
	key  bytea NOT NULL
);

CREATE TABLE deliveries (
	id          bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at          bigint  NOT NULL,
	target      text    NOT NULL,
	event       text    NOT NULL,
	session_id  text    NOT NULL DEFAULT '',
	request_id  text    NOT NULL DEFAULT '',
	status      text    NOT NULL,
	attempts    integer NOT NULL DEFAULT 0,
	http_status integer NOT NULL DEFAULT 0,
	error       text    NOT NULL DEFAULT '',
	latency_ns  bigint  NOT NULL DEFAULT 0
);
CREATE INDEX deliveries_target ON deliveries (target, id);

ALTER TABLE decisions ADD COLUMN route text NOT NULL DEFAULT '';
ALTER TABLE decisions ADD COLUMN approved_by text[] NOT NULL DEFAULT '{}';
