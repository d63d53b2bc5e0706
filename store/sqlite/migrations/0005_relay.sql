-- Version 5: the link to a session's CLI on a remote worker (store.Relay):
-- the worker, the relay session, how many of the worker's frames and of
-- the lines written to the CLI are stored, and where the relay began, so that the daemon can take the link over after a restart
-- without restarting the CLI.
ALTER TABLE sessions ADD COLUMN relay_worker   TEXT    NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN relay_session  TEXT    NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN relay_received INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN relay_sent     INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN relay_since    INTEGER NOT NULL DEFAULT 0;
