package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

// The operator's endpoints, under apiserver.AdminPath, for admin tokens
// and audited (apiserver.AdminHandler): claudectl prune, backup and reload
// call them. They answer JSON, errors as {"code", "message"} in the
// person's words.

// PruneOptions says what Prune removes; zero durations mean the settings'
// store.retention.
type PruneOptions struct {
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
	// ClosedSessions and Audit override store.retention's.
	ClosedSessions, Audit time.Duration
}

// A PruneReport is what Prune removed, or would remove.
type PruneReport struct {
	DryRun bool `json:"dry_run"`
	// ClosedSessions is the retention applied to ended sessions' events
	// ("" when none is set: nothing of them is removed); Before is the
	// end before which sessions lost their events.
	ClosedSessions string          `json:"closed_sessions,omitempty"`
	Before         time.Time       `json:"before,omitzero"`
	Sessions       []PrunedSession `json:"sessions"`
	Events         int64           `json:"events"`
	Bytes          int64           `json:"bytes"`
	Audit          string          `json:"audit,omitempty"`
	AuditBefore    time.Time       `json:"audit_before,omitzero"`
	AuditEntries   int64           `json:"audit_entries"`
	ReclaimedBytes int64           `json:"reclaimed_bytes"`
	Note           string          `json:"note,omitempty"`
	sessions       []store.PrunedSession
}

// A PrunedSession is one session whose events were (or would be)
// removed, in PruneReport's JSON.
type PrunedSession struct {
	ID       string    `json:"id"`
	Status   string    `json:"status"`
	EndedAt  time.Time `json:"ended_at"`
	FirstSeq int64     `json:"first_seq"`
	LastSeq  int64     `json:"last_seq"`
	Events   int64     `json:"events"`
	Bytes    int64     `json:"bytes"`
}

// ErrNoRetention is Prune's error when neither store.retention nor the
// options say what to remove.
var ErrNoRetention = errors.New(`nothing to prune: store.retention is not set (for example "store": {"retention": {"closed_sessions": "30d"}} in the settings file), and no retention was given`)

// Prune removes what retention no longer keeps: the events of sessions
// that ended before now minus ClosedSessions, the audit entries older than
// Audit, then reclaims the space where the store can. The hourly
// retention and claudectl prune call it; one runs at a time.
func (srv *Server) Prune(ctx context.Context, o PruneOptions) (*PruneReport, error) {
	m, ok := srv.db.(store.Maintainer)
	if !ok {
		return nil, errors.New("this store does not support pruning")
	}
	r := srv.Settings().Retention
	if o.ClosedSessions != 0 {
		r.ClosedSessions = o.ClosedSessions
	}
	if o.Audit != 0 {
		r.Audit = o.Audit
	}
	if r.ClosedSessions <= 0 && r.Audit <= 0 {
		return nil, ErrNoRetention
	}
	srv.pruning.Lock()
	defer srv.pruning.Unlock()
	rep := &PruneReport{DryRun: o.DryRun, Sessions: []PrunedSession{}}
	now := time.Now()
	if r.ClosedSessions > 0 {
		rep.ClosedSessions, rep.Before = FormatDays(r.ClosedSessions), now.Add(-r.ClosedSessions).UTC()
		ps, err := m.PruneEvents(ctx, rep.Before, o.DryRun)
		rep.sessions = ps
		for _, p := range ps {
			rep.Sessions = append(rep.Sessions, PrunedSession{ID: p.ID, Status: string(p.Status), EndedAt: p.EndedAt,
				FirstSeq: p.FirstSeq, LastSeq: p.LastSeq, Events: p.Events, Bytes: p.Bytes})
			rep.Events += p.Events
			rep.Bytes += p.Bytes
		}
		if err != nil {
			return rep, err
		}
	}
	if r.Audit > 0 {
		rep.Audit, rep.AuditBefore = FormatDays(r.Audit), now.Add(-r.Audit).UTC()
		n, err := m.PruneAudit(ctx, rep.AuditBefore, o.DryRun)
		rep.AuditEntries = n
		if err != nil {
			return rep, err
		}
	}
	if !o.DryRun && (rep.Events > 0 || rep.AuditEntries > 0) {
		rc, err := m.Reclaim(ctx)
		rep.ReclaimedBytes, rep.Note = rc.Bytes, rc.Note
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// FormatDays says a duration with days: "30d", "1d12h", "36h" is "1d12h".
func FormatDays(d time.Duration) string {
	days := d / (24 * time.Hour)
	rest := d % (24 * time.Hour)
	switch {
	case days == 0:
		return d.String()
	case rest == 0:
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd%s", days, strings.TrimSuffix(strings.TrimSuffix(rest.String(), "0s"), "0m"))
}

// DefaultRetentionInterval is how often the daemon applies
// store.retention.
const DefaultRetentionInterval = time.Hour

// retain applies store.retention every interval (the first time a
// minute after start, or a sixtieth of interval), until stop is closed.
func (srv *Server) retain(interval time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	t := time.NewTimer(interval / 60)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		rep, err := srv.Prune(ctx, PruneOptions{})
		switch {
		case errors.Is(err, ErrNoRetention) || ctx.Err() != nil:
		case err != nil:
			srv.Log.Error("retention: pruning failed; it is tried again in an hour", "err", err)
		case len(rep.Sessions) > 0 || rep.AuditEntries > 0:
			srv.Log.Info("retention: removed what store.retention no longer keeps", "sessions", len(rep.Sessions),
				"events", rep.Events, "bytes", rep.Bytes, "closed_sessions", rep.ClosedSessions,
				"audit_entries", rep.AuditEntries, "audit", rep.Audit, "reclaimed_bytes", rep.ReclaimedBytes, "note", rep.Note)
		}
		t.Reset(interval)
	}
}

// ErrBackupPostgres is Backup's error for a PostgreSQL store.
var ErrBackupPostgres = errors.New("the store is PostgreSQL: back it up with pg_dump (docs/operations.md), claudectl backup copies SQLite stores")

// Backup writes a consistent copy of the daemon's SQLite store to dest
// (which must not exist) while it serves (sqlite.DB.Backup).
func (srv *Server) Backup(ctx context.Context, dest string) error {
	db, ok := srv.db.(*sqlite.DB)
	if !ok {
		return ErrBackupPostgres
	}
	return db.Backup(ctx, dest)
}

// adminHandler serves the operator's endpoints.
func (srv *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+apiserver.AdminPath+"prune", srv.handlePrune)
	mux.HandleFunc("GET "+apiserver.AdminPath+"backup", srv.handleBackup)
	mux.HandleFunc("POST "+apiserver.AdminPath+"reload", srv.handleReload)
	return apiserver.AdminHandler(mux, srv.db)
}

// adminError answers an error as JSON.
func adminError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"code": code, "message": msg})
}

func writeAdminJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// PruneRequest is the body of POST /v1/admin/prune.
type PruneRequest struct {
	DryRun bool `json:"dry_run"`
	// ClosedSessions and Audit, if set, override store.retention
	// ("30d", "12h").
	ClosedSessions string `json:"closed_sessions,omitempty"`
	Audit          string `json:"audit,omitempty"`
}

func (srv *Server) handlePrune(w http.ResponseWriter, r *http.Request) {
	var req PruneRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil && err != io.EOF {
		adminError(w, http.StatusBadRequest, "invalid_argument", "the request is not a JSON object: "+err.Error())
		return
	}
	var o PruneOptions
	o.DryRun = req.DryRun
	for _, f := range []struct {
		name string
		s    string
		to   *time.Duration
	}{{"closed_sessions", req.ClosedSessions, &o.ClosedSessions}, {"audit", req.Audit, &o.Audit}} {
		if f.s == "" {
			continue
		}
		d, err := ParseDays(f.s)
		if err != nil || d < MinRetention {
			adminError(w, http.StatusBadRequest, "invalid_argument", fmt.Sprintf(
				"invalid %s %q: a duration of at least 1h such as 30d, 12h or 90d12h", f.name, clip(f.s)))
			return
		}
		*f.to = d
	}
	rep, err := srv.Prune(r.Context(), o)
	switch {
	case errors.Is(err, ErrNoRetention):
		adminError(w, http.StatusBadRequest, "failed_precondition", err.Error())
	case err != nil:
		srv.Log.Error("prune", "err", err)
		adminError(w, http.StatusInternalServerError, "internal", apiserver.ClientMessage(err.Error()))
	default:
		writeAdminJSON(w, rep)
	}
}

// backupChunk is what one write of a backup's download may take at most
// backupWriteTimeout to be accepted: a client that stops reading does not
// hold the copy (and a file in the data dir) for good.
const (
	backupChunk        = 1 << 20
	backupWriteTimeout = 30 * time.Second
)

// handleBackup sends a consistent copy of the SQLite store: made in a
// private directory beside the database, sent, removed.
func (srv *Server) handleBackup(w http.ResponseWriter, r *http.Request) {
	if srv.sqlitePath == "" {
		adminError(w, http.StatusConflict, "failed_precondition", ErrBackupPostgres.Error())
		return
	}
	tmp, err := os.MkdirTemp(filepath.Dir(srv.sqlitePath), ".claudectl-backup-")
	if err != nil {
		adminError(w, http.StatusInternalServerError, "internal", fmt.Sprintf("making room for the copy beside %s: %v", srv.sqlitePath, err))
		return
	}
	defer os.RemoveAll(tmp)
	dest := filepath.Join(tmp, "claudectl.db")
	start := time.Now()
	if err := srv.Backup(r.Context(), dest); err != nil {
		srv.Log.Error("backup", "err", err)
		adminError(w, http.StatusInternalServerError, "internal", apiserver.ClientMessage(err.Error()))
		return
	}
	f, err := os.Open(dest)
	if err != nil {
		adminError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		adminError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/vnd.sqlite3")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.Header().Set("Content-Disposition", `attachment; filename="claudectl.db"`)
	rc := http.NewResponseController(w)
	buf := make([]byte, backupChunk)
	var sent int64
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			rc.SetWriteDeadline(time.Now().Add(backupWriteTimeout))
			if _, err := w.Write(buf[:n]); err != nil {
				srv.Log.Warn("backup: the client stopped reading the copy", "sent", sent, "size", fi.Size(), "err", err)
				return
			}
			sent += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			srv.Log.Error("backup: reading the copy", "err", rerr)
			return
		}
	}
	srv.Log.Info("backup sent", "bytes", sent, "took", time.Since(start).Round(time.Millisecond).String(), "remote", r.RemoteAddr)
}
