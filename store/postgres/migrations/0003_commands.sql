-- Version 3: commands between daemons. A client's command for a session
-- that another daemon runs (send, interrupt, set model or mode, close), or
-- a decision on a permission request another daemon holds, is stored here
-- for that daemon, which a NOTIFY wakes; it claims the command, carries it
-- out and stores the result, which wakes the sender. owner '' is for
-- whichever daemon holds what the command names (a permission request).
CREATE TABLE commands (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	owner      text   NOT NULL,
	session    text   NOT NULL DEFAULT '',
	kind       text   NOT NULL,
	payload    text   NOT NULL DEFAULT '{}',
	sender     text   NOT NULL,
	created_at bigint NOT NULL,
	claimed_by text   NOT NULL DEFAULT '',
	done_at    bigint NOT NULL DEFAULT 0,
	result     text   NOT NULL DEFAULT ''
);

CREATE INDEX commands_open ON commands (owner, id) WHERE done_at = 0;
