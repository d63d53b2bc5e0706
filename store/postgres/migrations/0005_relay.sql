-- Version 5: the link to a session's CLI on a remote worker (store.Relay):
-- the worker, the relay session, how many of the worker's frames and of
-- the lines written to the CLI are stored, and where the relay began, so that another daemon can take the link over when the session's
-- owner dies, without restarting the CLI.
ALTER TABLE sessions ADD COLUMN relay_worker   text   NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN relay_session  text   NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN relay_received bigint NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN relay_sent     bigint NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN relay_since    bigint NOT NULL DEFAULT 0;
