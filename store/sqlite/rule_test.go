package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

func TestRules(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, nil)
	s := mustSession(t, db)
	rules := []*store.Rule{
		{Spec: "Bash(git status:*)", Behavior: "allow", CreatedBy: "config"},
		{Spec: "Edit(src/**)", Behavior: "allow", ProjectDir: "/src/app", CreatedBy: "client:alice"},
		{Spec: "Bash(rm:*)", Behavior: "deny", SessionID: s.ID, CreatedBy: "client:bob"},
	}
	for _, r := range rules {
		if err := db.CreateRule(ctx, r); err != nil {
			t.Fatal(err)
		}
		if r.ID == 0 || r.CreatedAt.IsZero() {
			t.Fatalf("CreateRule left %+v", r)
		}
	}
	if got := []string{rules[0].Scope(), rules[1].Scope(), rules[2].Scope()}; !cmp.Equal(got, []string{"global", "project", "session"}) {
		t.Errorf("scopes %v", got)
	}

	// The same rule again is the same rule.
	again := &store.Rule{Spec: "Edit(src/**)", Behavior: "allow", ProjectDir: "/src/app"}
	if err := db.CreateRule(ctx, again); err != nil || again.ID != rules[1].ID {
		t.Errorf("duplicate CreateRule: id %d (err %v), want %d", again.ID, err, rules[1].ID)
	}
	// Same spec, another behavior or scope: another rule.
	other := &store.Rule{Spec: "Edit(src/**)", Behavior: "deny", ProjectDir: "/src/app"}
	if err := db.CreateRule(ctx, other); err != nil || other.ID == rules[1].ID {
		t.Errorf("CreateRule with another behavior: id %d (err %v)", other.ID, err)
	}

	got, err := db.Rules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := append(rules, other)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Rules (-want +got):\n%s", diff)
	}

	if err := db.DeleteRule(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteRule(ctx, other.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second DeleteRule: %v", err)
	}

	for _, tt := range []struct {
		r    store.Rule
		want error
	}{
		{store.Rule{Behavior: "allow"}, store.ErrInvalid},
		{store.Rule{Spec: "Bash", Behavior: "maybe"}, store.ErrInvalid},
		{store.Rule{Spec: "Bash", Behavior: "allow", ProjectDir: "/a", SessionID: s.ID}, store.ErrInvalid},
		{store.Rule{Spec: "Bash", Behavior: "allow", SessionID: "nope"}, store.ErrNotFound},
	} {
		if err := db.CreateRule(ctx, &tt.r); !errors.Is(err, tt.want) {
			t.Errorf("CreateRule(%+v): %v, want %v", tt.r, err, tt.want)
		}
	}
}

func TestDecisions(t *testing.T) {
	ctx := context.Background()
	db, _ := mustOpen(t, &sqlite.Options{MaxPayloadBytes: 1024})
	big := json.RawMessage(`{"command":"` + strings.Repeat("x", 5000) + `"}`)
	var all []*store.Decision
	for i, d := range []*store.Decision{
		{SessionID: "s1", RequestID: "r1", ToolName: "Bash", Input: json.RawMessage(`{"command":"ls"}`), Behavior: "allow", By: "rule", RuleID: 7, RuleSpec: "Bash(ls:*)"},
		{SessionID: "s1", RequestID: "r2", ToolName: "Bash", Input: big, Behavior: "deny", By: "timeout", Message: "expired after 5m0s"},
		{SessionID: "s2", RequestID: "r3", ToolName: "AskUserQuestion", Input: json.RawMessage(`{"questions":[]}`), Behavior: "allow", By: "client:alice",
			UpdatedInput: json.RawMessage(`{"questions":[],"answers":{"q":"a"}}`)},
		{SessionID: "s2", RequestID: "r4", ToolName: "Write", Behavior: "withdrawn", By: "cli"},
	} {
		if err := db.AddDecision(ctx, d); err != nil {
			t.Fatalf("decision %d: %v", i, err)
		}
		all = append(all, d)
	}
	got, err := db.Decisions(ctx, store.DecisionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0].RequestID != "r4" || got[3].RequestID != "r1" {
		t.Fatalf("Decisions: %d, newest first expected", len(got))
	}
	if diff := cmp.Diff(all[2], got[1]); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if in := got[2].Input; len(in) > 1024 || !json.Valid(in) {
		t.Errorf("big input stored as %d bytes (valid %v), want at most 1024", len(in), json.Valid(in))
	}
	if got[0].Input != nil || got[0].UpdatedInput != nil {
		t.Errorf("nil inputs read back as %q %q", got[0].Input, got[0].UpdatedInput)
	}

	page, err := db.Decisions(ctx, store.DecisionFilter{SessionID: "s1", Limit: 1})
	if err != nil || len(page) != 1 || page[0].RequestID != "r2" {
		t.Fatalf("page 1: %v (err %v)", page, err)
	}
	page, err = db.Decisions(ctx, store.DecisionFilter{SessionID: "s1", BeforeID: page[0].ID})
	if err != nil || len(page) != 1 || page[0].RequestID != "r1" {
		t.Fatalf("page 2: %v (err %v)", page, err)
	}

	for _, d := range []store.Decision{
		{RequestID: "r", ToolName: "Bash", Behavior: "allow", By: "x"},
		{SessionID: "s", RequestID: "r", ToolName: "Bash", Behavior: "ask", By: "x"},
	} {
		if err := db.AddDecision(ctx, &d); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AddDecision(%+v): %v, want ErrInvalid", d, err)
		}
	}
}
