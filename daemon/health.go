package daemon

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/claudectl/claudectl/claude"
)

// Seed 000's degradation levels: what the sessions' CLIs print is watched
// for drift from what the daemon was tested with, per CLI version.
//
//   - Level 1, unknown types: messages of a type (or system subtype) the SDK
//     does not know. Listed; they hold a version at most LIKELY compatible.
//   - Level 2, parse failures: a known type that failed strict decoding
//     (recovered by the tolerant reader, or not). DEGRADED when it is a
//     line the daemon uses (results and their usage, permission requests,
//     system/init), else LIKELY.
//   - Level 3, missing features: a session's system/init lacks what the
//     daemon relies on (a tool the session asked for, session_id, model,
//     permissionMode, tool input schemas when the tools are objects).
//     DEGRADED, for that session and its version.
//
// Reasons are kept per version for the daemon's life; a version's level is
// its matrix level (claude.CheckCompatibility) lowered by its reasons.

// Kinds of compatibility reasons (CompatReason.Kind, Warning.Kind).
const (
	ReasonUnknownType    = "unknown_type"
	ReasonParseFailure   = "parse_failure"
	ReasonMissingFeature = "missing_feature"
)

// maxUnknownNames bounds the distinct unknown type names kept per version;
// the others are counted under "(other)".
const maxUnknownNames = 32

// criticalTools are the tools a session has unless it disallows them: the
// daemon's clients rely on them (seed 000 checks Bash).
var criticalTools = []string{"Bash", "Read", "Edit", "Write"}

// usedTypes are the message types the daemon reads fields of: a parse
// failure of one of them degrades the daemon.
var usedTypes = map[string]string{
	"result":          "results and their usage",
	"control_request": "permission requests",
	"system/init":     "the session's system/init",
}

// A CompatReason is one cause of a version's level.
type CompatReason struct {
	Kind    string // ReasonUnknownType, ReasonParseFailure, ReasonMissingFeature
	Subject string // the type ("type/subtype"), or the missing feature
	// Level is the level this reason holds its version to at best.
	Level               claude.Compatibility
	Message             string // in words
	Count               int64  // lines, or sessions for a missing feature
	FirstSeen, LastSeen time.Time
	// Example is one line of a parse failure, at most 200 bytes of it.
	Example string
	// SessionID is the session where it was last seen.
	SessionID string
}

// VersionCompat is what the daemon saw of one CLI version.
type VersionCompat struct {
	// Version is the CLI's version as its system/init says ("" when no
	// session of it printed one).
	Version string
	// Worker is true when it ran on a remote worker, Local when it ran as
	// the daemon's child (both may be true).
	Worker, Local bool
	// Matrix is the version's level in the compatibility matrix.
	Matrix claude.CompatibilityReport
	// Level is Matrix.Level lowered by the reasons.
	Level   claude.Compatibility
	Reasons []CompatReason
	// LiveSessions counts the sessions of this version whose CLI runs.
	LiveSessions int
}

// SessionCompat is a live session whose system/init lacks features.
type SessionCompat struct {
	SessionID string
	Version   string
	Level     claude.Compatibility
	Missing   []string
}

// Compatibility is what the sessions' CLIs showed, per version, and the
// live sessions that are degraded.
type Compatibility struct {
	Versions []VersionCompat
	Sessions []SessionCompat
}

// severity orders levels for "worst of": an unknown level is worse than
// a likely compatible one but not degraded.
func severity(c claude.Compatibility) int {
	switch c {
	case claude.FullyCompatible:
		return 1
	case claude.LikelyCompatible:
		return 2
	case claude.CompatibilityUnknown:
		return 3
	case claude.Degraded:
		return 4
	case claude.Incompatible:
		return 5
	}
	return 0
}

// WorstLevel returns the worse of two levels.
func WorstLevel(a, b claude.Compatibility) claude.Compatibility {
	if severity(b) > severity(a) {
		return b
	}
	return a
}

// compatTracker keeps the reasons of every version seen. It is safe for
// concurrent use (every session's reader records into it).
type compatTracker struct {
	now func() time.Time

	mu       sync.Mutex
	versions map[string]*versionState // guarded by mu
}

type versionState struct {
	local, worker bool
	reasons       map[string]*CompatReason // by kind + "\x00" + subject
	unknownNames  int
}

func newCompatTracker() *compatTracker {
	return &compatTracker{now: time.Now, versions: map[string]*versionState{}}
}

// observation is one thing a session saw, before it is recorded under its
// version.
type observation struct {
	kind, subject, message, example string
	level                           claude.Compatibility
	at                              time.Time
}

// record enters o for version and reports whether it is new for that
// version (its first sighting).
func (t *compatTracker) record(version string, worker bool, sessionID string, o observation) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	vs := t.state(version, worker)
	key := o.kind + "\x00" + o.subject
	r := vs.reasons[key]
	if r == nil && o.kind == ReasonUnknownType {
		if vs.unknownNames >= maxUnknownNames {
			o.subject = "(other)"
			key = o.kind + "\x00" + o.subject
			r = vs.reasons[key]
		} else {
			vs.unknownNames++
		}
	}
	if r == nil {
		r = &CompatReason{Kind: o.kind, Subject: o.subject, Level: o.level, Message: o.message,
			Example: o.example, FirstSeen: o.at}
		vs.reasons[key] = r
	}
	r.Count++
	r.LastSeen = o.at
	r.SessionID = sessionID
	r.Level = WorstLevel(r.Level, o.level)
	return r.Count == 1
}

// state returns version's state, noting where it ran; t.mu is held.
func (t *compatTracker) state(version string, worker bool) *versionState {
	vs := t.versions[version]
	if vs == nil {
		vs = &versionState{reasons: map[string]*CompatReason{}}
		t.versions[version] = vs
	}
	vs.worker = vs.worker || worker
	vs.local = vs.local || !worker
	return vs
}

// seen notes that a session runs version.
func (t *compatTracker) seen(version string, worker bool) {
	t.mu.Lock()
	t.state(version, worker)
	t.mu.Unlock()
}

// snapshot returns every version's state; live counts the live sessions
// by version.
func (t *compatTracker) snapshot(live map[string]int) []VersionCompat {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := slices.Sorted(maps.Keys(t.versions))
	for v := range live {
		if _, ok := t.versions[v]; !ok {
			keys = append(keys, v)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	out := make([]VersionCompat, 0, len(keys))
	for _, v := range keys {
		vc := VersionCompat{Version: v, LiveSessions: live[v]}
		if pv, err := claude.ParseVersion(v); err == nil {
			vc.Matrix = claude.CheckCompatibility(pv)
		} else {
			vc.Matrix = claude.CheckCompatibility(claude.Version{})
		}
		vc.Level = vc.Matrix.Level
		if vs := t.versions[v]; vs != nil {
			vc.Local, vc.Worker = vs.local, vs.worker
			for _, r := range vs.reasons {
				vc.Reasons = append(vc.Reasons, *r)
				vc.Level = WorstLevel(vc.Level, r.Level)
			}
		}
		slices.SortFunc(vc.Reasons, func(a, b CompatReason) int {
			if c := severity(b.Level) - severity(a.Level); c != 0 {
				return c
			}
			return strings.Compare(a.Kind+a.Subject, b.Kind+b.Subject)
		})
		out = append(out, vc)
	}
	return out
}

// Compatibility returns what the sessions' CLIs showed so far, per version,
// and the live sessions whose system/init lacks features.
func (d *Daemon) Compatibility() Compatibility {
	d.mu.Lock()
	actors := slices.Collect(maps.Values(d.actors))
	d.mu.Unlock()
	live := map[string]int{}
	var out Compatibility
	for _, a := range actors {
		c := a.compat.load()
		if !c.known {
			continue
		}
		live[c.version]++
		if len(c.missing) > 0 {
			out.Sessions = append(out.Sessions, SessionCompat{SessionID: a.id, Version: c.version,
				Level: claude.Degraded, Missing: slices.Clone(c.missing)})
		}
	}
	slices.SortFunc(out.Sessions, func(a, b SessionCompat) int { return strings.Compare(a.SessionID, b.SessionID) })
	out.Versions = d.compat.snapshot(live)
	return out
}

// sessionCompat is what an actor knows of its CLI: its version (from the
// system/init) and what that init lacked. The reader writes it; the
// Daemon reads it for health.
type sessionCompat struct {
	mu      sync.Mutex
	known   bool
	version string
	missing []string
}

type sessionCompatView struct {
	known   bool
	version string
	missing []string
}

func (s *sessionCompat) load() sessionCompatView {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sessionCompatView{s.known, s.version, slices.Clone(s.missing)}
}

// compatWatch is the reader's side: it classifies each message, holds
// observations until the session's version is known (its first
// system/init), and logs a Warning on the session for what is new.
type compatWatch struct {
	a           *actor
	version     string
	known       bool
	pending     []observation
	lastMissing []string
}

// observe classifies m: an unknown type, or a known type that did not
// decode strictly. It reads what the SDK's decoder found.
func (w *compatWatch) observe(m claude.Message) {
	var o observation
	if u, ok := m.(*claude.UnknownMessage); ok && u.Err == nil {
		subject := u.Kind()
		if u.Subtype != "" {
			subject += "/" + u.Subtype
		}
		o = observation{kind: ReasonUnknownType, subject: subject, level: claude.LikelyCompatible,
			message: fmt.Sprintf("the CLI printed messages of a type the daemon does not know (%s); they are stored and passed on raw", subject)}
	} else if de, recovered := claude.DecodeErrorOf(m); de != nil {
		subject := m.Kind()
		if sub := claude.SubtypeOf(m); subject == "system" && sub != "" {
			subject += "/" + sub
		}
		how := "it was passed on raw"
		if recovered {
			how = "the tolerant reader recovered it, dropping what did not fit"
		}
		o = observation{kind: ReasonParseFailure, subject: subject, level: claude.LikelyCompatible,
			example: strings.ToValidUTF8(string(de.Line), "")} // cut at 200 bytes, maybe mid-rune: proto strings must be UTF-8
		if uses, ok := usedTypes[subject]; ok {
			o.level = claude.Degraded
			o.message = fmt.Sprintf("%s lines failed to decode (%v); %s, so %s may be wrong", subject, de.Err, how, uses)
		} else {
			o.message = fmt.Sprintf("%s lines failed to decode (%v); %s", subject, de.Err, how)
		}
	} else {
		return
	}
	o.at = w.a.d.compat.now()
	w.add(o)
}

func (w *compatWatch) add(o observation) {
	if !w.known {
		if len(w.pending) < 64 {
			w.pending = append(w.pending, o)
		}
		return
	}
	if w.a.d.compat.record(w.version, w.a.remote(), w.a.id, o) {
		w.a.queue(w.a.ctxNoCancel(), &Warning{Kind: o.kind, Level: o.level, Message: o.message,
			Items: []string{o.subject}, ClaudeCodeVersion: w.version})
	}
}

// init checks a system/init for what the daemon relies on and learns the
// session's version from it.
func (w *compatWatch) init(m *claude.SystemInit) {
	if !w.known {
		w.version, w.known = m.ClaudeCodeVersion, true
		w.a.d.compat.seen(w.version, w.a.remote())
		pending := w.pending
		w.pending = nil
		for _, o := range pending {
			w.add(o)
		}
	}
	missing := missingFeatures(w.a.opts, m)
	w.a.compat.mu.Lock()
	w.a.compat.known, w.a.compat.version = true, w.version
	w.a.compat.missing = missing
	w.a.compat.mu.Unlock()
	if len(missing) == 0 || slices.Equal(missing, w.lastMissing) {
		w.lastMissing = missing
		return
	}
	w.lastMissing = missing
	now := w.a.d.compat.now()
	for _, f := range missing {
		w.a.d.compat.record(w.version, w.a.remote(), w.a.id, observation{kind: ReasonMissingFeature, subject: f,
			level: claude.Degraded, at: now,
			message: fmt.Sprintf("a session's system/init lacks %s, which the daemon relies on", f)})
	}
	w.a.queue(w.a.ctxNoCancel(), &Warning{Kind: ReasonMissingFeature, Level: claude.Degraded,
		Message: "the CLI's system/init lacks what the daemon relies on: " + strings.Join(missing, ", "),
		Items:   missing, ClaudeCodeVersion: w.version})
}

// end records what was held back when the session never printed a
// system/init.
func (w *compatWatch) end() {
	if !w.known && len(w.pending) > 0 {
		w.known = true
		pending := w.pending
		w.pending = nil
		for _, o := range pending {
			w.add(o)
		}
	}
}

// expectedTools returns the tools a session asked to have: the critical
// tools and the plain tool names it allows (not MCP tools, whose servers
// are the user's), less those it disallows, and an MCP permission prompt
// tool given in extra_args.
func expectedTools(o *SessionOptions) []string {
	disallowed := map[string]bool{}
	for _, t := range o.GetDisallowedTools() {
		disallowed[strings.TrimSpace(t)] = true // "Bash(rm:*)" limits Bash, it does not remove it
	}
	var want []string
	seen := map[string]bool{} // a set: allowed_tools is the client's, of any length
	add := func(t string) {
		t = strings.TrimSpace(t)
		if t == "" || strings.ContainsAny(t, "( ") || disallowed[t] || seen[t] {
			return
		}
		seen[t] = true
		want = append(want, t)
	}
	explicit := toolsFlag(o.GetExtraArgs())
	if explicit != nil {
		for _, t := range explicit {
			if slices.Contains(criticalTools, t) {
				add(t)
			}
		}
	} else {
		for _, t := range criticalTools {
			add(t)
		}
	}
	var inExplicit map[string]bool
	if explicit != nil {
		inExplicit = make(map[string]bool, len(explicit))
		for _, t := range explicit {
			inExplicit[t] = true
		}
	}
	for _, t := range o.GetAllowedTools() {
		if !strings.HasPrefix(t, "mcp__") && (explicit == nil || inExplicit[t]) {
			add(t)
		}
	}
	if p := flagValue(o.GetExtraArgs(), "--permission-prompt-tool"); p != "" && p != "stdio" {
		want = append(want, p)
	}
	return want
}

// toolsFlag returns the tool set given with --tools in extra args, nil
// when there is none ("default" is none).
func toolsFlag(args []string) []string {
	v := flagValue(args, "--tools")
	if v == "" || v == "default" {
		return nil
	}
	out := []string{}
	for t := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		out = append(out, t)
	}
	return out
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// missingFeatures returns what m lacks of what the daemon relies on.
func missingFeatures(o *SessionOptions, m *claude.SystemInit) []string {
	var missing []string
	if m.SessionID == "" {
		missing = append(missing, "session_id")
	}
	if m.Model == "" {
		missing = append(missing, "model")
	}
	if m.PermissionMode == "" {
		missing = append(missing, "permissionMode")
	}
	for _, t := range expectedTools(o) {
		if !slices.Contains(m.Tools, t) {
			missing = append(missing, t+" tool")
		}
	}
	if !toolSchemasPresent(m.Raw()) {
		missing = append(missing, "tool input schemas")
	}
	return missing
}

// toolSchemasPresent reports false when the init lists its tools as
// objects (older CLIs) and none has an input schema. Today's CLI lists
// names only, and then no schema is expected.
func toolSchemasPresent(raw []byte) bool {
	if !strings.Contains(string(raw), `"input_schema"`) && !strings.Contains(string(raw), `"tools":[{`) {
		return true // names only: the cheap check avoids decoding every init
	}
	var init struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(raw, &init) != nil || len(init.Tools) == 0 {
		return true
	}
	for _, t := range init.Tools {
		var obj struct {
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if json.Unmarshal(t, &obj) != nil { // a name
			return true
		}
		if len(obj.InputSchema) > 0 && string(obj.InputSchema) != "null" {
			return true
		}
	}
	return false
}
