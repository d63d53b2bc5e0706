-- Version 9: retention (store.retention, claudectl prune) removes the
-- events of sessions that ended long ago and keeps their rows (last_seq
-- stays what it was). pruned_seq is the seq of the last event removed, so
-- that a replay from before it says the events were removed rather than
-- that they are missing.
ALTER TABLE sessions ADD COLUMN pruned_seq bigint NOT NULL DEFAULT 0 CHECK (pruned_seq >= 0);

-- The ended sessions, oldest first: what retention looks for.
CREATE INDEX sessions_ended ON sessions (updated_at) WHERE status IN ('closed', 'failed');

-- The audit trail by age: what its own retention removes.
CREATE INDEX decisions_decided ON decisions (decided_at);
