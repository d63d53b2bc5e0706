-- Version 6: a rule's id is never given again. With a plain INTEGER
-- PRIMARY KEY, SQLite gave the id of the newest rule, once removed, to
-- the next rule added: the audit trail's "allowed by rule 3" then named
-- another rule, and a retried "rules rm 3" removed it. AUTOINCREMENT needs
-- the table rebuilt (foreign keys are off around the migrations); the
-- sequence starts after every id the rules and the audit trail have used.

CREATE TABLE rules_new (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	spec        TEXT    NOT NULL,
	behavior    TEXT    NOT NULL CHECK (behavior IN ('allow', 'deny', 'ask')),
	project_dir TEXT    NOT NULL DEFAULT '',
	session_id  TEXT    REFERENCES sessions (id) ON DELETE CASCADE, -- NULL unless session scope
	created_by  TEXT    NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL
) STRICT;

INSERT INTO rules_new (id, spec, behavior, project_dir, session_id, created_by, created_at)
SELECT id, spec, behavior, project_dir, session_id, created_by, created_at FROM rules;

DROP TABLE rules;
ALTER TABLE rules_new RENAME TO rules;
CREATE UNIQUE INDEX rules_unique ON rules (spec, behavior, project_dir, COALESCE(session_id, ''));
CREATE INDEX rules_session ON rules (session_id);

DELETE FROM sqlite_sequence WHERE name IN ('rules', 'rules_new');
INSERT INTO sqlite_sequence (name, seq)
SELECT 'rules', max(coalesce((SELECT max(id) FROM rules), 0), coalesce((SELECT max(rule_id) FROM decisions), 0));
