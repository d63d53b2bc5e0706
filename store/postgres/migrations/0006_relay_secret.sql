-- Version 6: the SHA-256 of a relay session's secret (store.Relay.SecretHash):
-- a worker coming back to another daemon must present the secret for it to
-- take the session over.
ALTER TABLE sessions ADD COLUMN relay_secret_hash text NOT NULL DEFAULT '';
