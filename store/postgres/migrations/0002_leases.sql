-- Version 2: session leases, for several daemons on one database. A
-- session is owned by one daemon at a time: owner names it, lease_until
-- (Unix nanoseconds, the server's clock) is when its lease expires unless
-- renewed, and fence grows by one at every acquisition. A daemon writes a
-- session's events and updates only while the row's fence is the one its
-- acquisition returned, so an old owner that was paused past its lease
-- (and replaced) cannot write once it wakes.
ALTER TABLE sessions ADD COLUMN owner       text   NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN lease_until bigint NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN fence       bigint NOT NULL DEFAULT 0;
CREATE INDEX sessions_owner ON sessions (owner) WHERE owner <> '';
