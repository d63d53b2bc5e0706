-- Version 4: the permission requests waiting for a person, as the daemon
-- holding each one (owner) published them, so that every daemon can list
-- them and a decision through any daemon reaches the one holding it. A row
-- whose owner no longer holds the session's lease is stale (that daemon
-- died) and is not listed.
CREATE TABLE pending_requests (
	request_id text   PRIMARY KEY,
	session    text   NOT NULL,
	owner      text   NOT NULL,
	request    text   NOT NULL, -- the request as the CLI sent it, JSON
	created_at bigint NOT NULL
);

CREATE INDEX pending_requests_session ON pending_requests (session);
