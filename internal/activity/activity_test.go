package activity

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/claudectl/claudectl/store"
)

func TestSummarize(t *testing.T) {
	zone := time.FixedZone("UTC-5", -5*3600)
	now := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC) // 27 Nov, 21:00 in UTC-5
	sessions := []*store.Session{
		{ID: "a", Cwd: "/src/app", Model: "opus", Status: store.StatusClosed, CreatedAt: now.Add(-25 * time.Hour)},
		{ID: "b", Cwd: "/src/lib", Status: store.StatusIdle, CreatedAt: now.Add(-time.Hour)},
		{ID: "c", Cwd: "/src/old", Status: store.StatusFailed, CreatedAt: now.AddDate(0, 0, -10)}, // before the range
	}
	recs := []*store.UsageRecord{
		{SessionID: "a", Time: now.Add(-25 * time.Hour), CostUSD: 1, InputTokens: 10, OutputTokens: 5},
		{SessionID: "a", Time: now.Add(-2 * time.Hour), CostUSD: 0.5, Models: map[string]store.ModelUsage{"opus": {CostUSD: 0.4}, "haiku": {CostUSD: 0.1}}},
		{SessionID: "b", Time: now.Add(-time.Hour), CostUSD: 0.25, CacheReadTokens: 7},
		{SessionID: "gone", Time: now.Add(-time.Hour), CostUSD: 2},
		{SessionID: "a", Time: now.AddDate(0, 0, -5), CostUSD: 9}, // before the range
	}
	got := Summarize(recs, sessions, Options{Days: 2, Now: now, Zone: zone}, false)
	want := &Summary{
		Days: []string{"2026-11-26", "2026-11-27"},
		CostByCwd: []Series{{"(a deleted session)", []float64{0, 2}}, {"/src/app", []float64{1, 0.5}},
			{"/src/lib", []float64{0, 0.25}}},
		CostByModel: []Series{{"default", []float64{0, 2.25}}, {"opus", []float64{1, 0.4}}, {"haiku", []float64{0, 0.1}}},
		Turns:       Series{"turns", []float64{1, 3}},
		Tokens: []Series{{"input", []float64{10, 0}}, {"output", []float64{5, 0}}, {"cache read", []float64{0, 7}},
			{"cache write", []float64{0, 0}}},
		SessionsByStatus: []Series{{"idle", []float64{0, 1}}, {"closed", []float64{1, 0}}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Summarize (-want +got):\n%s", d)
	}
}

func TestSummarizeOther(t *testing.T) {
	now := time.Now()
	var recs []*store.UsageRecord
	var sessions []*store.Session
	for i := range MaxSeries + 3 {
		id := fmt.Sprint(i)
		sessions = append(sessions, &store.Session{ID: id, Cwd: "/d" + id, Status: store.StatusClosed, CreatedAt: now})
		recs = append(recs, &store.UsageRecord{SessionID: id, Time: now, CostUSD: float64(i + 1)})
	}
	got := Summarize(recs, sessions, Options{Days: 1, Now: now, Zone: time.UTC}, false).CostByCwd
	if len(got) != MaxSeries || got[0].Name != fmt.Sprintf("/d%d", MaxSeries+2) || got[MaxSeries-1].Name != Other ||
		got[MaxSeries-1].Values[0] != 1+2+3+4 {
		t.Errorf("CostByCwd = %+v", got)
	}
}
