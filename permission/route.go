package permission

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/claudectl/claudectl/claude"
)

// A Route says who is asked for what: a request no rule settled, whose
// tool call matches Tools, made in a session whose directory is in Dirs
// (or below one) and whose id is in Sessions, goes to the people Ask
// names, of whom Approvals different ones must allow it (the two-person
// rule: 2); after EscalateAfter unanswered, EscalateTo are asked too;
// after ExpireAfter it is denied with OnExpiry. An empty Tools, Dirs or
// Sessions matches every request. Routes are tried in order; the first
// that matches applies, and a request no route matches goes to whoever
// may decide, as without routes.
type Route struct {
	// Name names the route in cards, decisions and the audit trail.
	Name string
	// Tools are rule patterns in the rules' own syntax ("Bash(git push:*)",
	// "Edit(//etc/**)", "WebFetch"): a compound Bash line matches when one
	// of its commands does.
	Tools    []string
	Dirs     []string
	Sessions []string
	// Ask names users ("alice") and groups ("group:ops").
	Ask []string
	// Approvals is how many different people must allow; 0 means 1. A
	// denial by any of them settles the request.
	Approvals     int
	EscalateAfter time.Duration
	EscalateTo    []string
	// ExpireAfter, when set, replaces the broker's timeouts for the
	// request; OnExpiry is the denial's message then ("" for one saying
	// who was asked and for how long).
	ExpireAfter time.Duration
	OnExpiry    string

	engine *Engine // Tools as ask rules
}

// Routing is the route a pending request follows, as its card shows it.
type Routing struct {
	Route         string
	Ask           []string
	Approvals     int // how many must allow, at least 1
	EscalateAfter time.Duration
	EscalateTo    []string
	ExpireAfter   time.Duration
	OnExpiry      string
}

// An Approval is one person's allow of a request that needs more than one.
type Approval struct {
	By string
	At time.Time
}

// A Router picks the route of each request. The zero Router has no
// routes. It is safe for concurrent use once built.
type Router struct {
	routes []Route
}

// NewRouter checks and compiles routes; home is where "~/" patterns start
// (empty: the user's home). Errors name the route and what is wrong.
func NewRouter(routes []Route, home string) (*Router, error) {
	r := &Router{}
	names := map[string]bool{}
	for i, rt := range routes {
		where := fmt.Sprintf("route %d", i+1)
		if rt.Name != "" {
			where = fmt.Sprintf("route %q", rt.Name)
		}
		switch {
		case rt.Name == "":
			return nil, fmt.Errorf("%s: needs a name", where)
		case names[rt.Name]:
			return nil, fmt.Errorf("%s: the name is used by an earlier route", where)
		case len(rt.Ask) == 0:
			return nil, fmt.Errorf("%s: ask names nobody (users, or groups as \"group:NAME\")", where)
		case rt.Approvals < 0 || rt.Approvals > 5:
			return nil, fmt.Errorf("%s: approvals %d: from 1 to 5", where, rt.Approvals)
		case rt.EscalateAfter < 0 || rt.ExpireAfter < 0:
			return nil, fmt.Errorf("%s: durations must be positive", where)
		case rt.EscalateAfter > 0 && len(rt.EscalateTo) == 0:
			return nil, fmt.Errorf("%s: escalate_after without escalate_to: whom to ask after it?", where)
		case rt.EscalateAfter > 0 && rt.ExpireAfter > 0 && rt.EscalateAfter >= rt.ExpireAfter:
			return nil, fmt.Errorf("%s: escalate_after %s is not before expire_after %s", where, rt.EscalateAfter, rt.ExpireAfter)
		}
		names[rt.Name] = true
		for _, who := range append(slices.Clone(rt.Ask), rt.EscalateTo...) {
			if name, _ := strings.CutPrefix(who, "group:"); name == "" || strings.ContainsAny(name, " \t\n,") {
				return nil, fmt.Errorf("%s: %q is not a user or a group:NAME", where, who)
			}
		}
		for _, d := range rt.Dirs {
			if !filepath.IsAbs(d) {
				return nil, fmt.Errorf("%s: directory %q is not absolute", where, d)
			}
		}
		if len(rt.Tools) > 0 {
			rt.engine = NewEngine(&EngineOptions{Home: home})
			for _, spec := range rt.Tools {
				rule, err := NewRule(spec, Ask, Scope{})
				if err != nil {
					var se *SyntaxError
					if errors.As(err, &se) {
						return nil, fmt.Errorf("%s: tool pattern %q: %s", where, spec, se.Msg)
					}
					return nil, fmt.Errorf("%s: tool pattern %q: %w", where, spec, err)
				}
				if err := rt.engine.Add(rule); err != nil {
					return nil, fmt.Errorf("%s: tool pattern %q: %w", where, spec, err)
				}
			}
		}
		rt.Dirs = slices.Clone(rt.Dirs)
		for i, d := range rt.Dirs {
			rt.Dirs[i] = filepath.Clean(d)
		}
		r.routes = append(r.routes, rt)
	}
	return r, nil
}

// Route returns the routing of req, made in session at.SessionID whose
// directory is at.ProjectDir: the first route that matches; nil for none.
func (r *Router) Route(req *claude.PermissionRequest, at Scope) *Routing {
	if r == nil {
		return nil
	}
	for i := range r.routes {
		rt := &r.routes[i]
		if rt.matches(req, at) {
			return &Routing{Route: rt.Name, Ask: slices.Clone(rt.Ask), Approvals: max(rt.Approvals, 1),
				EscalateAfter: rt.EscalateAfter, EscalateTo: slices.Clone(rt.EscalateTo),
				ExpireAfter: rt.ExpireAfter, OnExpiry: rt.OnExpiry}
		}
	}
	return nil
}

// Routes reports whether r has any route.
func (r *Router) Routes() bool { return r != nil && len(r.routes) > 0 }

func (rt *Route) matches(req *claude.PermissionRequest, at Scope) bool {
	if len(rt.Sessions) > 0 && !slices.Contains(rt.Sessions, at.SessionID) {
		return false
	}
	if len(rt.Dirs) > 0 && !slices.ContainsFunc(rt.Dirs, func(d string) bool { return within(at.ProjectDir, d) }) {
		return false
	}
	if rt.engine == nil {
		return true
	}
	if req.ToolName == "AskUserQuestion" { // the engine asks a person about it whatever its rules
		return slices.Contains(rt.Tools, "AskUserQuestion")
	}
	return rt.engine.Evaluate(req, at).Behavior == Ask
}

// Asks reports whether routing r asks user, a member of groups, given
// whether the request was escalated.
func (r *Routing) Asks(user string, groups []string, escalated bool) bool {
	names := r.Ask
	if escalated {
		names = append(slices.Clone(names), r.EscalateTo...)
	}
	for _, n := range names {
		if g, ok := strings.CutPrefix(n, "group:"); ok {
			if slices.Contains(groups, g) {
				return true
			}
		} else if n == user {
			return true
		}
	}
	return false
}

// Asked names who is asked now: Ask, and EscalateTo once escalated.
func (r *Routing) Asked(escalated bool) []string {
	if escalated {
		return append(slices.Clone(r.Ask), r.EscalateTo...)
	}
	return slices.Clone(r.Ask)
}

// expiryMessage is the denial of a routed request nobody settled in time.
func (r *Routing) expiryMessage(tool string, after time.Duration, escalated bool) string {
	if r.OnExpiry != "" {
		return r.OnExpiry
	}
	return fmt.Sprintf("Permission request expired: nobody of %s (route %s) settled it within %s, so %s was denied.",
		strings.Join(r.Asked(escalated), ", "), r.Route, after, tool)
}
