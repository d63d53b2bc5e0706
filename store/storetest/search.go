package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/store"
)

// indexNower is what both engines offer tests: index at once rather than
// at the indexer's next tick.
type indexNower interface{ IndexNow() }

// waitFor polls cond, poking the indexer, until it holds or 20 s pass.
func waitFor(t *testing.T, s store.Store, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if ix, ok := s.(indexNower); ok {
			ix.IndexNow()
		}
		ok, got := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s after 20 s", what, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func searchHits(t *testing.T, s store.Store, q store.SearchQuery) []*store.SearchHit {
	t.Helper()
	hits, err := s.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("Search(%q): %v", q.Text, err)
	}
	return hits
}

func hitsText(hits []*store.SearchHit) string {
	var b strings.Builder
	for _, h := range hits {
		fmt.Fprintf(&b, "[%s %d %s %q] ", h.SessionID, h.Seq, h.Kind, h.Snippet)
	}
	return fmt.Sprintf("%d hits %s", len(hits), b.String())
}

// conversation appends to session id what a turn logs: the prompt, the
// reply, a tool call and its output, thinking, partial output, a title.
func conversation(t *testing.T, s store.Store, id, prompt, output string, title string) []*store.Event {
	evs := []*store.Event{
		{SessionID: id, Direction: store.ToCLI, Type: "user", Raw: fmt.Appendf(nil, `{"type":"user","message":{"role":"user","content":%q}}`, prompt)},
		{SessionID: id, Direction: store.FromCLI, Type: "stream_event", Raw: []byte(`{"type":"stream_event","event":{"delta":{"text":"partialword"}}}`)},
		{SessionID: id, Direction: store.FromCLI, Type: "assistant", Raw: []byte(`{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"secretthought"}]}}`)},
		{SessionID: id, Direction: store.FromCLI, Type: "assistant", Raw: []byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"I will look at the **migrations** first."}]}}`)},
		{SessionID: id, Direction: store.FromCLI, Type: "assistant", Raw: []byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"grep -rn needlecommand ."}}]}}`)},
		{SessionID: id, Direction: store.FromCLI, Type: "user", Raw: fmt.Appendf(nil, `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":%q}]}}`, output)},
	}
	if title != "" {
		evs = append(evs, &store.Event{SessionID: id, Direction: store.FromCLI, Type: "system", Subtype: "session_title_changed",
			Raw: fmt.Appendf(nil, `{"type":"system","subtype":"session_title_changed","title":%q}`, title)})
	}
	if err := s.AppendBatch(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	return evs
}

func search(t *testing.T, s store.Store) {
	ctx := context.Background()
	a, b := newSession(t, s), newSession(t, s)
	evsA := conversation(t, s, a.ID, "Fix the migration\nplease, it fails", "found: the zebra-striped gnu at line 12", "Migration fix")
	conversation(t, s, b.ID, "another prompt", "nothing striped here", "")
	// A second title: the last one printed wins.
	if _, err := s.Append(ctx, &store.Event{SessionID: a.ID, Direction: store.FromCLI, Type: "system", Subtype: "session_title_changed",
		Raw: []byte(`{"type":"system","subtype":"session_title_changed","title":"Fix the failing migration"}`)}); err != nil {
		t.Fatal(err)
	}

	// A tool's output, found by two of its words, whatever the query's
	// punctuation and case.
	out := evsA[5]
	waitFor(t, s, "the tool output indexed", func() (bool, string) {
		hits := searchHits(t, s, store.SearchQuery{Text: `ZEBRA-"gnu*`})
		return len(hits) == 1 && hits[0].SessionID == a.ID && hits[0].Seq == out.Seq, hitsText(hits)
	})
	h := searchHits(t, s, store.SearchQuery{Text: "zebra gnu"})[0]
	if h.Kind != store.SearchKindToolOutput || !strings.Contains(h.Snippet, store.SnippetStart) || !strings.Contains(h.Snippet, store.SnippetEnd) ||
		!strings.Contains(strings.NewReplacer(store.SnippetStart, "", store.SnippetEnd, "").Replace(h.Snippet), "zebra") {
		t.Errorf("the hit: %s, want a tool_output with the match marked", hitsText([]*store.SearchHit{h}))
	}
	if h.Time.IsZero() || time.Since(h.Time) > time.Hour {
		t.Errorf("the hit's time %v", h.Time)
	}
	for _, c := range []struct {
		q    string
		kind string
		seq  int64
	}{
		{"migration please", store.SearchKindPrompt, evsA[0].Seq},
		{"MIGRATIONS first", store.SearchKindReply, evsA[3].Seq},
		{"needlecommand", store.SearchKindToolInput, evsA[4].Seq},
	} {
		hits := searchHits(t, s, store.SearchQuery{Text: c.q, SessionID: a.ID})
		if len(hits) != 1 || hits[0].Kind != c.kind || hits[0].Seq != c.seq {
			t.Errorf("Search(%q): %s, want one %s at seq %d", c.q, hitsText(hits), c.kind, c.seq)
		}
	}
	// Words in both sessions: newest first; one session's only.
	if hits := searchHits(t, s, store.SearchQuery{Text: "striped"}); len(hits) != 2 || hits[0].SessionID != b.ID {
		t.Errorf("Search(striped): %s, want b's then a's", hitsText(hits))
	}
	if hits := searchHits(t, s, store.SearchQuery{Text: "striped", SessionID: a.ID}); len(hits) != 1 || hits[0].SessionID != a.ID {
		t.Errorf("Search(striped) in a: %s", hitsText(hits))
	}
	if hits := searchHits(t, s, store.SearchQuery{Text: "striped", Limit: 1}); len(hits) != 1 {
		t.Errorf("Search(striped, limit 1): %s", hitsText(hits))
	}
	// Not indexed: thinking, partial messages, the title line.
	for _, q := range []string{"secretthought", "partialword", "failing"} {
		if hits := searchHits(t, s, store.SearchQuery{Text: q}); len(hits) != 0 {
			t.Errorf("Search(%q): %s, want none", q, hitsText(hits))
		}
	}
	// Operators of either engine are words like any other: a query
	// finds the events holding all its words, no more, no less.
	for q, want := range map[string]int{`zebra OR nothing`: 0, `NEAR(zebra gnu)`: 0, `zebra -gnu`: 1, `zeb*`: 0,
		`"zebra`: 1, `zebra & !gnu`: 1, `zebra:*`: 1, `(zebra) | x`: 0, `zebra's`: 0} {
		hits, err := s.Search(ctx, store.SearchQuery{Text: q})
		if err != nil {
			t.Errorf("Search(%q): %v", q, err)
		} else if len(hits) != want {
			t.Errorf("Search(%q): %s, want %d", q, hitsText(hits), want)
		}
	}
	if _, err := s.Search(ctx, store.SearchQuery{Text: `' "" *`}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a search of no word: %v, want ErrInvalid", err)
	}
	for _, q := range []store.SearchQuery{{Text: ""}, {Text: strings.Repeat("a", store.MaxSearchBytes+1)},
		{Text: strings.Repeat("a ", store.MaxSearchTerms+1)}, {Text: "zebra", Limit: store.MaxSearchHits + 1}, {Text: "zebra", Limit: -1}, {Text: "\xff"}} {
		if _, err := s.Search(ctx, q); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Search(%.20q, limit %d): %v, want ErrInvalid", q.Text, q.Limit, err)
		}
	}

	// Titles and first prompts, from the same index.
	waitFor(t, s, "the titles", func() (bool, string) {
		ga, err := s.Session(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		gb, err := s.Session(ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprintf("a %q %q, b %q %q", ga.Title, ga.FirstPrompt, gb.Title, gb.FirstPrompt)
		return got == `a "Fix the failing migration" "Fix the migration please, it fails", b "" "another prompt"`, got
	})
	list, err := s.Sessions(ctx, store.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range list {
		if ss.ID == a.ID && ss.Title != "Fix the failing migration" {
			t.Errorf("Sessions: a's title %q", ss.Title)
		}
	}
	// A later prompt does not replace the first.
	conversation(t, s, b.ID, "a later prompt", "more", "")
	waitFor(t, s, "the later prompt indexed", func() (bool, string) {
		hits := searchHits(t, s, store.SearchQuery{Text: "later prompt"})
		return len(hits) == 1, hitsText(hits)
	})
	if gb, _ := s.Session(ctx, b.ID); gb.FirstPrompt != "another prompt" {
		t.Errorf("b's first prompt after a second: %q", gb.FirstPrompt)
	}
}

// searchAfterDelete: a deleted session's events are no longer found, and
// the sessions after it are indexed still (SQLite may give the deleted
// chunks' ids to new ones).
func searchAfterDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	keep, gone := newSession(t, s), newSession(t, s)
	conversation(t, s, keep.ID, "kept prompt", "kept output", "")
	conversation(t, s, gone.ID, "gone prompt", "gone output", "")
	waitFor(t, s, "both indexed", func() (bool, string) {
		hits := searchHits(t, s, store.SearchQuery{Text: "output"})
		return len(hits) == 2, hitsText(hits)
	})
	if err := s.DeleteSession(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	if hits := searchHits(t, s, store.SearchQuery{Text: "gone"}); len(hits) != 0 {
		t.Errorf("a deleted session's events found: %s", hitsText(hits))
	}
	next := newSession(t, s)
	conversation(t, s, next.ID, "next prompt", "next output", "")
	waitFor(t, s, "the next session indexed", func() (bool, string) {
		hits := searchHits(t, s, store.SearchQuery{Text: "next output"})
		return len(hits) == 1 && hits[0].SessionID == next.ID, hitsText(hits)
	})
	if hits := searchHits(t, s, store.SearchQuery{Text: "output"}); len(hits) != 2 {
		t.Errorf("Search(output) after the deletion: %s, want kept and next", hitsText(hits))
	}
}

// usageSince: the ledger of every session, from a time on.
func usageSince(t *testing.T, s store.Store) {
	ctx := context.Background()
	start := time.Now().Add(-time.Second)
	var ids []string
	for i, cost := range []float64{0.25, 0.5} {
		a := newSession(t, s)
		ids = append(ids, a.ID)
		proc, err := s.NewProcess(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		res := &store.Event{SessionID: a.ID, Direction: store.FromCLI, Type: "result", Subtype: "success", Raw: []byte(`{"type":"result"}`)}
		if err := s.AppendResultAsync(ctx, func(_ *store.UsageRecord, _ *store.Session, err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		}, res, store.UsageInput{SessionID: a.ID, Process: proc, Time: start.Add(time.Duration(i+1) * time.Millisecond),
			Result: store.ResultUsage{Subtype: "success", Cumulative: store.Cumulative{CostUSD: cost,
				Models: map[string]store.ModelUsage{"claude-x": {CostUSD: cost, OutputTokens: 10}}}}}, nil); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
	recs, err := s.UsageSince(ctx, start, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%s %.2f %d %.2f", r.SessionID, r.CostUSD, r.OutputTokens, r.Models["claude-x"].CostUSD))
	}
	want := []string{ids[0] + " 0.25 10 0.25", ids[1] + " 0.50 10 0.50"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("UsageSince = %q, want %q", got, want)
	}
	if recs, err := s.UsageSince(ctx, start, 1); err != nil || len(recs) != 1 || recs[0].SessionID != ids[0] {
		t.Errorf("UsageSince(limit 1) = %d records, %v", len(recs), err)
	}
	if recs, err := s.UsageSince(ctx, time.Now().Add(time.Hour), 0); err != nil || len(recs) != 0 {
		t.Errorf("UsageSince(an hour from now) = %d records, %v", len(recs), err)
	}
}
