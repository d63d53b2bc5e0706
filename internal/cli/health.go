package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claude"
)

// levelName is a compatibility level in words, as claude.Compatibility
// says it.
func levelName(l v1.CompatibilityLevel) string {
	switch l {
	case v1.CompatibilityLevel_COMPATIBILITY_LEVEL_FULLY_COMPATIBLE:
		return claude.FullyCompatible.String()
	case v1.CompatibilityLevel_COMPATIBILITY_LEVEL_LIKELY_COMPATIBLE:
		return claude.LikelyCompatible.String()
	case v1.CompatibilityLevel_COMPATIBILITY_LEVEL_DEGRADED:
		return claude.Degraded.String()
	case v1.CompatibilityLevel_COMPATIBILITY_LEVEL_INCOMPATIBLE:
		return claude.Incompatible.String()
	}
	return claude.CompatibilityUnknown.String()
}

// compatible reports whether l needs no header: fully or likely compatible.
func compatible(l v1.CompatibilityLevel) bool {
	return l == v1.CompatibilityLevel_COMPATIBILITY_LEVEL_FULLY_COMPATIBLE ||
		l == v1.CompatibilityLevel_COMPATIBILITY_LEVEL_LIKELY_COMPATIBLE
}

// healthHeader is the line client commands print above their output when
// the daemon's Claude Code is not fully or likely compatible; "" when it
// is, or when the daemon cannot say (an older daemon).
func (c *daemonClient) healthHeader(ctx context.Context) string {
	res, err := c.health.HealthDetails(ctx, connect.NewRequest(&v1.HealthDetailsRequest{}))
	if err != nil {
		return ""
	}
	if st := res.Msg.GetStore(); st != nil && !st.Ok {
		if st.GetError() == "" { // it writes (or has not tried since), but cannot be read
			return fmt.Sprintf("the daemon cannot read its store: %s; see claudectl doctor --server %s", userMessage(st.GetReadError()), c.addr)
		}
		return fmt.Sprintf("the daemon cannot write its store since %s: %s; sessions whose events it could not record were suspended",
			st.GetFailingSince().AsTime().Local().Format(time.DateTime), st.GetError())
	}
	cc := res.Msg.GetClaudeCode()
	if cc == nil || compatible(cc.Level) {
		return ""
	}
	why := cc.Message
	if len(cc.Reasons) > 0 {
		why = cc.Reasons[0].Message
		if n := len(cc.Reasons) - 1; n > 0 {
			why += fmt.Sprintf(" (and %d more)", n)
		}
	}
	why = strings.ReplaceAll(why, "\n", " ")
	return fmt.Sprintf("Claude Code %s: %s: %s; see claudectl doctor --server %s", cc.Version, levelName(cc.Level), why, c.addr)
}

// daemonDoctorReport is what doctor --server prints with --json.
type daemonDoctorReport struct {
	Server           string          `json:"server"`
	CLIPath          string          `json:"cli_path,omitempty"`
	Version          string          `json:"version,omitempty"`
	Compatibility    string          `json:"compatibility"`
	Message          string          `json:"message,omitempty"`
	Reasons          []doctorReason  `json:"reasons,omitempty"`
	Versions         []doctorVersion `json:"versions,omitempty"`
	DegradedSessions []doctorSession `json:"degraded_sessions,omitempty"`
	// Store is "ok", or why the daemon cannot write or read its store.
	Store string `json:"store"`
	// Unread is what the daemon could not read of its store (its sessions,
	// whose counts are then unknown).
	Unread []string `json:"unread,omitempty"`
	// StoreLocation is where the store is ("sqlite PATH", "postgres
	// HOST:PORT/DATABASE").
	StoreLocation string `json:"store_location,omitempty"`
	// DaemonName and LeaseTTL: this daemon's name in the leases of a store
	// shared by several daemons, and how long a lease lasts.
	DaemonName string `json:"daemon_name,omitempty"`
	LeaseTTL   string `json:"lease_ttl,omitempty"`
	Running    int32  `json:"running_sessions"`
	Suspended  int32  `json:"suspended_sessions"`
	Queued     int32  `json:"queued_sessions"`
	// MaxRunning is sessions.max_running (0: no limit).
	MaxRunning int32 `json:"max_running"`
	// Workers are the registered remote workers (claudectl workers).
	Workers  []workerJSON `json:"workers,omitempty"`
	OK       bool         `json:"ok"`
	ExitCode int          `json:"exit_code"`
}

// doctorReason is one cause of the daemon's level.
type doctorReason struct {
	Kind      string `json:"kind"`
	Subject   string `json:"subject"`
	Level     string `json:"level"`
	Message   string `json:"message"`
	Count     int64  `json:"count"`
	LastSeen  string `json:"last_seen,omitempty"`
	Example   string `json:"example,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	Version   string `json:"claude_code_version,omitempty"`
}

// doctorVersion is one CLI version the daemon's sessions ran.
type doctorVersion struct {
	Version      string `json:"version"`
	Level        string `json:"level"`
	Where        string `json:"where"`
	LiveSessions int32  `json:"live_sessions"`
	Counted      bool   `json:"counted"`
}

// doctorSession is a live session whose system/init lacks features.
type doctorSession struct {
	SessionID string   `json:"session_id"`
	Missing   []string `json:"missing"`
}

// diagnoseDaemon asks the daemon how it judges the Claude Code it runs.
func diagnoseDaemon(ctx context.Context, dc *daemonClient) (*daemonDoctorReport, error) {
	res, err := dc.health.HealthDetails(ctx, connect.NewRequest(&v1.HealthDetailsRequest{}))
	if err != nil {
		return nil, dc.explain(err, "asking the daemon's health")
	}
	cc := res.Msg.GetClaudeCode()
	rep := &daemonDoctorReport{Server: dc.addr, CLIPath: cc.GetPath(), Version: cc.GetVersion(),
		Compatibility: levelName(cc.GetLevel()), Message: cc.GetMessage(), Store: "ok",
		Running: res.Msg.RunningSessions, Suspended: res.Msg.SuspendedSessions, Queued: res.Msg.QueuedSessions,
		MaxRunning: res.Msg.MaxRunning, StoreLocation: res.Msg.GetStore().GetLocation(),
		DaemonName: res.Msg.GetStore().GetDaemonName()}
	if ms := res.Msg.GetStore().GetLeaseTtlMs(); ms > 0 {
		rep.LeaseTTL = (time.Duration(ms) * time.Millisecond).String()
	}
	for _, w := range res.Msg.GetWorkers() {
		rep.Workers = append(rep.Workers, workerToJSON(w))
	}
	defer func() {
		if st := res.Msg.GetStore(); st != nil && !st.Ok {
			// "cannot write since …: disk full (…)": the store's own
			// "the store cannot write: " would say it twice.
			var why []string
			if e := st.GetError(); e != "" {
				why = append(why, fmt.Sprintf("cannot write since %s: %s", st.GetFailingSince().AsTime().UTC().Format("2006-01-02 15:04:05Z"),
					strings.TrimPrefix(e, "the store cannot write: ")))
			}
			if e := userMessage(st.GetReadError()); e != "" {
				why = append(why, "cannot read: "+strings.TrimPrefix(e, "the store cannot read: "))
			}
			rep.Store = cmp.Or(strings.Join(why, "; "), "not ok (the daemon gave no reason)")
			rep.Unread = st.GetUnread()
			rep.OK, rep.ExitCode = false, ExitUnavailable
		}
	}()
	for _, r := range cc.GetReasons() {
		x := doctorReason{Kind: r.Kind, Subject: r.Subject, Level: levelName(r.Level), Message: r.Message, Count: r.Count,
			Example: r.Example, SessionID: r.SessionId, Version: r.ClaudeCodeVersion}
		if r.LastSeen != nil {
			x.LastSeen = r.LastSeen.AsTime().UTC().Format("2006-01-02 15:04:05Z")
		}
		rep.Reasons = append(rep.Reasons, x)
	}
	for _, v := range cc.GetVersions() {
		where := "local"
		switch {
		case v.Worker && v.Local:
			where = "local, worker"
		case v.Worker:
			where = "worker"
		}
		rep.Versions = append(rep.Versions, doctorVersion{v.Version, levelName(v.Level), where, v.LiveSessions, v.Counted})
	}
	for _, s := range cc.GetDegradedSessions() {
		rep.DegradedSessions = append(rep.DegradedSessions, doctorSession{s.SessionId, s.Missing})
	}
	switch cc.GetLevel() {
	case v1.CompatibilityLevel_COMPATIBILITY_LEVEL_FULLY_COMPATIBLE, v1.CompatibilityLevel_COMPATIBILITY_LEVEL_LIKELY_COMPATIBLE,
		v1.CompatibilityLevel_COMPATIBILITY_LEVEL_DEGRADED:
		rep.OK = true
	case v1.CompatibilityLevel_COMPATIBILITY_LEVEL_INCOMPATIBLE:
		rep.ExitCode = ExitConfig
	default:
		rep.ExitCode = ExitUnavailable
	}
	return rep, nil
}

func (r *daemonDoctorReport) print(w io.Writer) {
	row := func(k, v string) {
		if k != "" {
			k += ":"
		}
		fmt.Fprintf(w, "%-15s %s\n", k, v)
	}
	row("Daemon", r.Server)
	if r.CLIPath != "" {
		row("Claude Code", r.CLIPath)
	}
	if r.Version != "" {
		row("Version", r.Version)
	}
	row("Compatibility", r.Compatibility)
	if r.Message != "" {
		row("", r.Message)
	}
	if r.StoreLocation != "" {
		row("Store", r.Store+" ("+r.StoreLocation+")")
	} else {
		row("Store", r.Store)
	}
	if r.DaemonName != "" {
		row("Daemon", r.DaemonName+" (session leases of "+r.LeaseTTL+", shared store)")
	}
	limit := "no limit"
	if r.MaxRunning > 0 {
		limit = fmt.Sprintf("at most %d", r.MaxRunning)
	}
	// Running counts live CLIs, idle ones too (a session idle in
	// claudectl sessions): "running" here read as "in a turn". The
	// suspended ones are counted from the store.
	suspended := fmt.Sprintf("%d suspended", r.Suspended)
	if slices.Contains(r.Unread, "sessions") {
		suspended = "suspended unknown (the store could not be read)"
	}
	row("Sessions", fmt.Sprintf("%d with a live CLI (%s), %d queued, %s", r.Running, limit, r.Queued, suspended))
	now := time.Now()
	for i, w := range r.Workers {
		k := ""
		if i == 0 {
			k = "Workers"
		}
		row(k, fmt.Sprintf("%s: %s, %d/%d sessions, Claude Code %s", w.Name, workerStateText(w, now), len(w.Sessions), w.Capacity, orDash(w.CLIVersion)))
	}
	for i, x := range r.Reasons {
		k := ""
		if i == 0 {
			k = "Reasons"
		}
		line := fmt.Sprintf("[%s] %s (%s %s, ×%d", x.Level, x.Message, x.Kind, x.Subject, x.Count)
		if x.Version != "" {
			line += ", Claude Code " + x.Version
		}
		if x.LastSeen != "" {
			line += ", last " + x.LastSeen
		}
		if x.SessionID != "" {
			line += ", session " + x.SessionID
		}
		row(k, line+")")
		if x.Example != "" {
			row("", "  e.g. "+x.Example)
		}
	}
	for i, v := range r.Versions {
		k := ""
		if i == 0 {
			k = "CLI versions"
		}
		name := v.Version
		if name == "" {
			name = "(unknown)"
		}
		line := fmt.Sprintf("%s: %s (%s, %d live)", name, v.Level, v.Where, v.LiveSessions)
		if !v.Counted {
			line += ", no longer in use"
		}
		row(k, line)
	}
	for i, s := range r.DegradedSessions {
		k := ""
		if i == 0 {
			k = "Degraded"
		}
		row(k, s.SessionID+" lacks "+strings.Join(s.Missing, ", "))
	}
}
