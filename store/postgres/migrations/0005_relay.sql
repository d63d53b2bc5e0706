-- Version 5: the link to a session's CLI on a remote worker (store.Relay):
-- the worker, the relay session and how many of the worker's frames are
-- stored, so that another daemon can take the link over when the session's
-- owner dies, without restarting the CLI.
ALTER TABLE sessions ADD COLUMN relay_worker   text   NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN relay_session  text   NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN relay_received bigint NOT NULL DEFAULT 0;
