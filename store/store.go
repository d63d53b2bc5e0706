// Package store defines what the claudectl daemon keeps on disk: sessions,
// their event logs, the usage ledger, permission rules and the audit trail of
// permission decisions. The types here carry no storage code; package
// [github.com/claudectl/claudectl/store/sqlite] implements them on SQLite.
// Keeping the two apart lets API code and clients use the records without
// linking a database engine.
//
// A daemon uses the store like this:
//
//	db, err := sqlite.Open(ctx, "claudectl.db", nil)
//	if err != nil {
//		return err
//	}
//	defer db.Close()
//	db.MarkRunningInterrupted(ctx) // sessions whose process died with the last daemon
//
//	s := &store.Session{Cwd: "/src/app", Status: store.StatusStarting}
//	if err := db.CreateSession(ctx, s); err != nil {
//		return err
//	}
//	ev := &store.Event{SessionID: s.ID, Direction: store.FromCLI, Type: "assistant", Raw: line}
//	if _, err := db.Append(ctx, ev); err != nil { // durable once it returns
//		return err
//	}
//	fanOut(ev) // only now: a client never sees an event the log lacks
//
//	for ev, err := range db.Events(ctx, s.ID, clientSeq) { // catch-up after a reconnect
//		...
//	}
//
// # Errors
//
// Methods wrap the sentinels below, so test them with [errors.Is]:
// [ErrNotFound] for a missing session or rule, [ErrUnavailable] for an event
// range the log cannot serve, [ErrClosed] after Close, [ErrSchemaTooNew] when
// the database was written by a newer claudectl, [ErrWriteFailed] when the
// disk or the database file refuses a write (see [WriteHealth]),
// [ErrReadFailed] when they (or the database server) cannot be read.
package store

import "errors"

var (
	// ErrNotFound means the session, rule or record named does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists means a record of that name exists already (a live token's
	// name).
	ErrExists = errors.New("already exists")
	// ErrUnavailable means a replay cannot be served in full: the events
	// asked for are not in the log (the client is ahead of it, or they were
	// never stored). Replays fail with it before yielding anything.
	ErrUnavailable = errors.New("events unavailable")
	// ErrClosed is returned by calls made after the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrSchemaTooNew means the database has migrations this binary does
	// not know: it was written by a newer claudectl.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
	// ErrInvalid means a record was refused because a field is missing or
	// out of range; the message names the field.
	ErrInvalid = errors.New("invalid record")
	// ErrWriteFailed means a write failed because of the disk or the
	// database file (disk full, I/O error, read-only file, out of
	// memory), not because of the record: the same write can succeed once
	// the cause is fixed. The message says why in plain words and names the
	// data directory.
	ErrWriteFailed = errors.New("the store cannot write")
	// ErrReadFailed means a read failed because of the disk, the database
	// file or the database server (it cannot be reached, it is shutting
	// down), not because of what was asked: the same read can succeed
	// once the cause is fixed. As with ErrWriteFailed, the message says
	// why in plain words and names where the store is, never the
	// database's user or password.
	ErrReadFailed = errors.New("the store cannot read")
	// ErrNotOwner means a write was refused because another daemon owns
	// the session now (its lease passed to it): the writer's fencing
	// number is out of date. Only stores shared by several daemons return
	// it.
	ErrNotOwner = errors.New("the session is owned by another daemon")
)
