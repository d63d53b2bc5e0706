-- Version 2: why a session failed or stopped, where its CLI runs, and the
-- session it was forked from.

ALTER TABLE sessions ADD COLUMN error     TEXT NOT NULL DEFAULT ''; -- the last failure, with the CLI's stderr tail
ALTER TABLE sessions ADD COLUMN worker    TEXT NOT NULL DEFAULT ''; -- '' (local) or the remote worker's name
ALTER TABLE sessions ADD COLUMN parent_id TEXT NOT NULL DEFAULT ''; -- the daemon session it was forked from
