package apiserver_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/claudetest"
)

// Search over the API: a session's reply found, with its matched words as
// parts of the snippet and the session's title (its first prompt); bad
// queries refused as invalid, in words. Activity: the session's turn in
// today's spend, turns and tokens, and its bounds.
func TestSearchAndActivity(t *testing.T) {
	c := start(t, claudetest.Reply(claudetest.Text("The Capybara-Index is rebuilt nightly.")))
	res, err := c.sessions.CreateSession(c.ctx, connect.NewRequest(&v1.CreateSessionRequest{
		Options: &v1.SessionOptions{Cwd: t.TempDir()}, Prompt: "when is the index rebuilt?"}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.Session.Id
	c.untilIdle(t, id, 0, nil)

	var hits []*v1.SearchHit
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, err := c.sessions.Search(c.ctx, connect.NewRequest(&v1.SearchRequest{Query: `capybara "INDEX"`}))
		if err != nil {
			t.Fatal(err)
		}
		if hits = r.Msg.Hits; len(hits) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(hits) != 1 || hits[0].SessionId != id || hits[0].Kind != "reply" || hits[0].SessionTitle != "when is the index rebuilt?" {
		t.Fatalf("Search: %v", hits)
	}
	var marked, all []string
	for _, p := range hits[0].Snippet {
		all = append(all, p.Text)
		if p.Match {
			marked = append(marked, p.Text)
		}
	}
	if strings.Join(all, "") != "The Capybara-Index is rebuilt nightly." || strings.Join(marked, ",") != "Capybara,Index" {
		t.Errorf("snippet %q, marked %q", all, marked)
	}
	for _, q := range []*v1.SearchRequest{{Query: "  "}, {Query: strings.Repeat("x", 201)}, {Query: "x", Limit: 201}} {
		_, err := c.sessions.Search(c.ctx, connect.NewRequest(q))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("Search(%.20q, limit %d): %v, want invalid_argument", q.Query, q.Limit, err)
		}
	}
	if _, err := c.sessions.Search(c.ctx, connect.NewRequest(&v1.SearchRequest{Query: "x", SessionId: "nope"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("Search in no such session: %v, want not_found", err)
	}

	before := time.Now().UTC().Format(time.DateOnly)
	a, err := c.sessions.Activity(c.ctx, connect.NewRequest(&v1.ActivityRequest{Days: 3}))
	if err != nil {
		t.Fatal(err)
	}
	m := a.Msg
	if len(m.Days) != 3 || m.Days[2] != before && m.Days[2] != time.Now().UTC().Format(time.DateOnly) {
		t.Fatalf("Activity days %v", m.Days)
	}
	s, err := c.sessions.GetSession(c.ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	cost := s.Msg.Session.Totals.CostUsd
	if len(m.CostByCwd) != 1 || m.CostByCwd[0].Name != s.Msg.Session.Cwd || m.CostByCwd[0].Values[2] != cost || cost <= 0 ||
		m.Turns.Values[2] != 1 || m.Tokens[1].Name != "output" || m.Tokens[1].Values[2] <= 0 || len(m.CostByModel) == 0 ||
		len(m.SessionsByStatus) != 1 || m.SessionsByStatus[0].Values[2] != 1 {
		t.Errorf("Activity: %v (the session spent %v)", m, cost)
	}
	for _, r := range []*v1.ActivityRequest{{Days: -1}, {Days: 367}, {UtcOffsetMinutes: 15 * 60}} {
		if _, err := c.sessions.Activity(c.ctx, connect.NewRequest(r)); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("Activity(%v): %v, want invalid_argument", r, err)
		}
	}

	// A token scoped to another directory finds nothing of this session
	// and its plots hold none of its spend.
	other := c.as(t, c.mint(t, &v1.CreateTokenRequest{Name: "elsewhere", Role: "viewer", Dirs: []string{t.TempDir()}}))
	r, err := other.sessions.Search(c.ctx, connect.NewRequest(&v1.SearchRequest{Query: "capybara"}))
	if err != nil || len(r.Msg.Hits) != 0 {
		t.Errorf("a scoped Search: %v, %v; want no hits", r, err)
	}
	_, err = other.sessions.Search(c.ctx, connect.NewRequest(&v1.SearchRequest{Query: "capybara", SessionId: id}))
	wantCode(t, "a scoped Search in a session outside", err, connect.CodePermissionDenied, "outside the scope")
	oa, err := other.sessions.Activity(c.ctx, connect.NewRequest(&v1.ActivityRequest{Days: 3}))
	if err != nil || len(oa.Msg.CostByCwd) != 0 || oa.Msg.Turns.Values[2] != 0 || len(oa.Msg.SessionsByStatus) != 0 {
		t.Errorf("a scoped Activity: %v, %v; want nothing of the session", oa, err)
	}
	vr, err := c.as(t, c.mint(t, &v1.CreateTokenRequest{Name: "viewer", Role: "viewer"})).sessions.Search(c.ctx, connect.NewRequest(&v1.SearchRequest{Query: "capybara"}))
	if err != nil || len(vr.Msg.Hits) != 1 {
		t.Errorf("a viewer's Search: %v, %v; want the hit", vr, err)
	}
}
