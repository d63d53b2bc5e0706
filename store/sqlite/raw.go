package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// rawConn runs the event writer's statements on the write connection's
// driver connection itself, below database/sql, and keeps them prepared
// for the writer's life.
//
// database/sql starts a goroutine for every transaction (to roll it back
// when its context ends) and, inside one, for every query (to close its
// rows when that context ends); it wraps each prepared statement run in a
// transaction in a Stmt of its own, under locks, and converts every
// argument through reflection. The writer commits thousands of
// transactions a second and never cancels one: at the end of a hundred
// turns, its goroutines were the most numerous in the daemon, each one
// woken by its commit, ahead of the subscribers that commit had woken.
// BenchmarkTurnEdge/result, 100 turn ends, three pairs on a loaded
// machine: 15.4/15.2/29.3 ms before, 11.7/14.7/19.6 ms after.
//
// Only the writer's goroutine uses a rawConn, inside sql.Conn.Raw, which
// holds the connection for it.
type rawConn struct {
	ci    driver.Conn
	stmts map[string]driver.Stmt // prepared on ci
}

// maxRawStmts bounds the statements a rawConn keeps prepared: the writer
// runs a few kinds (a session update's text depends on which fields it
// sets); past the bound, a statement is prepared and closed at each run.
const maxRawStmts = 64

// prepare returns the statement of q and a function to call when done
// with it (it closes a statement not kept).
func (c *rawConn) prepare(ctx context.Context, q string) (driver.Stmt, func(), error) {
	if st, ok := c.stmts[q]; ok {
		return st, func() {}, nil
	}
	pc, ok := c.ci.(driver.ConnPrepareContext)
	if !ok {
		return nil, nil, fmt.Errorf("sqlite: the driver's connection cannot prepare with a context")
	}
	st, err := pc.PrepareContext(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	if len(c.stmts) < maxRawStmts {
		c.stmts[q] = st
		return st, func() {}, nil
	}
	return st, func() { st.Close() }, nil
}

// namedValues converts args as database/sql does for a driver without a
// value checker of its own (driver.DefaultParameterConverter).
func namedValues(args []any) ([]driver.NamedValue, error) {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, fmt.Errorf("sqlite: argument %d: %w", i+1, err)
		}
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv, nil
}

// exec runs q, which returns no rows.
func (c *rawConn) exec(ctx context.Context, q string, args ...any) (driver.Result, error) {
	st, done, err := c.prepare(ctx, q)
	if err != nil {
		return nil, err
	}
	defer done()
	nv, err := namedValues(args)
	if err != nil {
		return nil, err
	}
	se, ok := st.(driver.StmtExecContext)
	if !ok {
		return nil, fmt.Errorf("sqlite: the driver's statement cannot run with a context")
	}
	return se.ExecContext(ctx, nv)
}

// queryRow runs q and returns its first row (sql.ErrNoRows without one).
func (c *rawConn) queryRow(ctx context.Context, q string, args ...any) rawRow {
	st, done, err := c.prepare(ctx, q)
	if err != nil {
		return rawRow{err: err}
	}
	defer done()
	nv, err := namedValues(args)
	if err != nil {
		return rawRow{err: err}
	}
	sq, ok := st.(driver.StmtQueryContext)
	if !ok {
		return rawRow{err: fmt.Errorf("sqlite: the driver's statement cannot query with a context")}
	}
	rows, err := sq.QueryContext(ctx, nv)
	if err != nil {
		return rawRow{err: err}
	}
	vals := make([]driver.Value, len(rows.Columns()))
	err = rows.Next(vals)
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	switch {
	case errors.Is(err, io.EOF):
		return rawRow{err: sql.ErrNoRows}
	case err != nil:
		return rawRow{err: err}
	}
	return rawRow{vals: vals} // the driver copies a row's bytes out of SQLite's memory
}

// A rawRow is a row read by queryRow, or the error reading it.
type rawRow struct {
	vals []driver.Value
	err  error
}

// Scan copies the row's columns into dest, as sql.Row.Scan does for the
// types the writer reads: integers, floats and strings.
func (r rawRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if len(dest) != len(r.vals) {
		return fmt.Errorf("sqlite: %d destinations for %d columns", len(dest), len(r.vals))
	}
	for i, d := range dest {
		if err := scanValue(d, r.vals[i]); err != nil {
			return fmt.Errorf("sqlite: column %d: %w", i+1, err)
		}
	}
	return nil
}

func scanValue(dest any, v driver.Value) error {
	switch d := dest.(type) {
	case *int64:
		if n, ok := v.(int64); ok {
			*d = n
			return nil
		}
	case *float64:
		switch n := v.(type) {
		case float64:
			*d = n
			return nil
		case int64:
			*d = float64(n)
			return nil
		}
	case *string:
		switch t := v.(type) {
		case string:
			*d = t
			return nil
		case []byte:
			*d = string(t)
			return nil
		}
	}
	return fmt.Errorf("cannot store %T in %T", v, dest)
}

// Statements of a writer's transaction.
const (
	sqlBegin    = `BEGIN IMMEDIATE` // the write lock at BEGIN, as the write connection's _txlock asks
	sqlCommit   = `COMMIT`
	sqlRollback = `ROLLBACK`
)

// begin starts a transaction.
func (c *rawConn) begin(ctx context.Context) error {
	_, err := c.exec(ctx, sqlBegin)
	return err
}

// commit commits the transaction; when that fails, it rolls it back
// (SQLite may have left it open, SQLITE_BUSY say, or rolled it back
// itself) so that the connection is out of it either way.
func (c *rawConn) commit(ctx context.Context) error {
	_, err := c.exec(ctx, sqlCommit)
	if err != nil {
		c.rollback(ctx)
	}
	return err
}

// rollback rolls the transaction back, if one is open.
func (c *rawConn) rollback(ctx context.Context) {
	c.exec(ctx, sqlRollback) // "no transaction is active" when there is none: nothing to do
}

// withRaw runs fn with the writer's connection, held for it through
// sql.Conn.Raw. The statements prepared on a connection are dropped if
// database/sql ever replaced it.
func (a *appender) withRaw(ctx context.Context, fn func(c *rawConn) error) error {
	conn, err := a.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var ferr error
	err = conn.Raw(func(ci any) error {
		dc, ok := ci.(driver.Conn)
		if !ok {
			return fmt.Errorf("sqlite: the driver's connection is a %T", ci)
		}
		if a.raw.ci != dc {
			// A connection database/sql dropped took its statements with
			// it: closing them now would touch a closed connection.
			a.raw = rawConn{ci: dc, stmts: make(map[string]driver.Stmt)}
		}
		ferr = fn(&a.raw)
		if errors.Is(ferr, driver.ErrBadConn) {
			return ferr // database/sql drops the connection; the next batch gets a new one
		}
		return nil
	})
	if err != nil {
		return err
	}
	return ferr
}

// closeRaw closes the statements the writer kept prepared.
func (a *appender) closeRaw() {
	if a.raw.ci == nil {
		return
	}
	a.withRaw(context.Background(), func(c *rawConn) error {
		for q, st := range c.stmts {
			st.Close()
			delete(c.stmts, q)
		}
		return nil
	})
}
