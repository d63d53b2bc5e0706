-- Version 7: the SHA-256 of a relay session's secret (store.Relay.SecretHash):
-- a worker coming back after the daemon restarted must present the secret
-- for the daemon to take the session over.
ALTER TABLE sessions ADD COLUMN relay_secret_hash TEXT NOT NULL DEFAULT '';
