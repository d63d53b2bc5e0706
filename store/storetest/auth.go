package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claudectl/claudectl/store"
)

// tokenLimitTokens is the MaxTokens of the store TokenLimit fills.
const tokenLimitTokens = 5

func hashOf(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// tokens: a token is stored with its user, read back whole, refused under
// a live token's name, revoked (its name free again, its row kept), and
// touched; bad fields are refused naming the field.
func tokens(t *testing.T, s store.Store) {
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	phone := &store.Token{Name: "phone", User: "alice", Role: "approver", Dirs: []string{"/src/app", "/src/lib"},
		Hash: hashOf("cctl_a"), ExpiresAt: exp, CreatedBy: "bootstrap"}
	if err := s.CreateToken(ctx, phone); err != nil {
		t.Fatal(err)
	}
	if phone.ID == 0 || phone.CreatedAt.IsZero() {
		t.Fatalf("CreateToken set id %d, created %v", phone.ID, phone.CreatedAt)
	}
	users, err := s.Users(ctx)
	if err != nil || len(users) != 1 || users[0].Name != "alice" {
		t.Fatalf("Users after a token for alice: %+v, %v", users, err)
	}
	dup := &store.Token{Name: "phone", User: "bob", Role: "viewer", Hash: hashOf("cctl_b")}
	if err := s.CreateToken(ctx, dup); !errors.Is(err, store.ErrExists) || !strings.Contains(err.Error(), `"phone"`) {
		t.Fatalf("a second live token called phone: %v, want ErrExists naming it", err)
	}
	ts, err := s.Tokens(ctx)
	if err != nil || len(ts) != 1 {
		t.Fatalf("Tokens: %+v, %v", ts, err)
	}
	got := ts[0]
	if got.Name != "phone" || got.User != "alice" || got.Role != "approver" || strings.Join(got.Dirs, ",") != "/src/app,/src/lib" ||
		string(got.Hash) != string(phone.Hash) || !got.ExpiresAt.Equal(exp) || got.CreatedBy != "bootstrap" ||
		!got.RevokedAt.IsZero() || !got.LastUsedAt.IsZero() || got.SessionID != "" {
		t.Fatalf("read back %+v", got)
	}
	if !got.Live(time.Now()) || got.Live(exp) {
		t.Errorf("Live: %v now, %v at its expiry", got.Live(time.Now()), got.Live(exp))
	}
	used := time.Now().Truncate(time.Microsecond)
	if err := s.TouchTokens(ctx, map[int64]time.Time{phone.ID: used}); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchTokens(ctx, map[int64]time.Time{phone.ID: used.Add(-time.Minute), 1 << 40: used}); err != nil {
		t.Fatal(err) // an earlier time changes nothing; an unknown id (revoked and gone) is no error
	}
	ts, _ = s.Tokens(ctx)
	if !ts[0].LastUsedAt.Equal(used) {
		t.Errorf("last used %v, want %v", ts[0].LastUsedAt, used)
	}
	rev, err := s.RevokeToken(ctx, "phone", "admin-token")
	if err != nil || rev.RevokedAt.IsZero() || rev.RevokedBy != "admin-token" || rev.ID != phone.ID {
		t.Fatalf("RevokeToken: %+v, %v", rev, err)
	}
	if _, err := s.RevokeToken(ctx, "phone", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoking it again: %v, want ErrNotFound", err)
	}
	again := &store.Token{Name: "phone", User: "alice", Role: "approver", Hash: hashOf("cctl_c")}
	if err := s.CreateToken(ctx, again); err != nil {
		t.Fatalf("a new token under a revoked one's name: %v", err)
	}
	ts, _ = s.Tokens(ctx)
	if len(ts) != 2 || ts[0].RevokedAt.IsZero() || !ts[1].RevokedAt.IsZero() {
		t.Fatalf("after revoking and remaking: %+v", ts)
	}
	for _, bad := range []struct {
		field string
		tok   store.Token
	}{
		{"name", store.Token{User: "a", Role: "viewer", Hash: hashOf("1")}},
		{"token name", store.Token{Name: strings.Repeat("n", store.MaxNameBytes+1), User: "a", Role: "viewer", Hash: hashOf("2")}},
		{"token name", store.Token{Name: "a\x1b[31m", User: "a", Role: "viewer", Hash: hashOf("3")}},
		{"token name", store.Token{Name: "a\xff", User: "a", Role: "viewer", Hash: hashOf("4")}},
		{"user", store.Token{Name: "x", Role: "viewer", Hash: hashOf("5")}},
		{"hash", store.Token{Name: "x", User: "a", Role: "viewer", Hash: []byte("short")}},
		{"scope directory", store.Token{Name: "x", User: "a", Role: "viewer", Hash: hashOf("6"), Dirs: []string{"rel/dir"}}},
		{"scope directories", store.Token{Name: "x", User: "a", Role: "viewer", Hash: hashOf("7"), Dirs: make([]string, store.MaxScopeDirs+1)}},
	} {
		if err := s.CreateToken(ctx, &bad.tok); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("CreateToken(%+v): %v, want ErrInvalid naming %q", bad.tok, err, bad.field)
		}
	}
	u := &store.User{Name: "alice", Subject: "sub-1", Email: "alice@example.com", Groups: []string{"ops", "dev"}}
	if err := s.PutUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	users, _ = s.Users(ctx)
	if len(users) != 1 || users[0].Email != "alice@example.com" || strings.Join(users[0].Groups, ",") != "ops,dev" {
		t.Fatalf("after PutUser: %+v", users[0])
	}
	if err := s.PutUser(ctx, &store.User{Name: "bob\x00"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a user name with a NUL: %v, want ErrInvalid", err)
	}
	if _, err := s.RevokeToken(ctx, "no\x00such", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoking a name with a NUL: %v, want ErrNotFound", err)
	}
}

// tokenLimit: one live token past the limit is refused with a
// *store.LimitError; a revocation makes room.
func tokenLimit(t *testing.T, s store.Store) {
	ctx := context.Background()
	// Expired tokens do not count, and one expired long ago goes.
	if err := s.CreateToken(ctx, &store.Token{Name: "ancient", User: "u", Role: "viewer", Hash: hashOf("ancient"),
		ExpiresAt: time.Now().Add(-store.ExpiredKept - time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateToken(ctx, &store.Token{Name: "expired", User: "u", Role: "viewer", Hash: hashOf("expired"),
		ExpiresAt: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	for i := range tokenLimitTokens {
		if err := s.CreateToken(ctx, &store.Token{Name: fmt.Sprint("t", i), User: "u", Role: "viewer", Hash: hashOf(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	err := s.CreateToken(ctx, &store.Token{Name: "over", User: "u", Role: "viewer", Hash: hashOf("over")})
	var le *store.LimitError
	if !errors.As(err, &le) || le.What != "tokens" || le.Max != tokenLimitTokens {
		t.Fatalf("a token past the limit: %v, want a *store.LimitError", err)
	}
	if _, err := s.RevokeToken(ctx, "t0", "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateToken(ctx, &store.Token{Name: "over", User: "u", Role: "viewer", Hash: hashOf("over")}); err != nil {
		t.Fatalf("after a revocation: %v", err)
	}
	if ts, _ := s.Tokens(ctx); slices.ContainsFunc(ts, func(t *store.Token) bool { return t.Name == "ancient" }) {
		t.Errorf("a token expired %v ago is kept", store.ExpiredKept)
	}
	if _, err := s.RevokeToken(ctx, "expired", "x"); err != nil {
		t.Fatal(err)
	}
	// Revoked tokens are kept up to the limit, the oldest go first.
	for i := 1; i < tokenLimitTokens; i++ {
		if _, err := s.RevokeToken(ctx, fmt.Sprint("t", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RevokeToken(ctx, "over", "x"); err != nil {
		t.Fatal(err)
	}
	ts, err := s.Tokens(ctx)
	if err != nil || len(ts) != tokenLimitTokens {
		t.Fatalf("after %d revocations: %d tokens kept, %v; want %d", tokenLimitTokens+1, len(ts), err, tokenLimitTokens)
	}
	if ts[0].Name == "t0" {
		t.Errorf("the oldest revoked token was kept: %+v", ts[0])
	}
}

// audit: entries are read back newest first, filtered by user, session
// and time, with hostile text kept storable and long details cut.
func audit(t *testing.T, s store.Store) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	for i, e := range []*store.AuditEntry{
		{At: t0, User: "alice", Token: "phone", ClientKind: "page", Remote: "127.0.0.1:5", Action: "Decide", SessionID: "s1", Detail: "allow Bash", Outcome: "ok"},
		{User: "bob", Token: "ci", ClientKind: "cli", Action: "CreateSession", SessionID: "s2", Outcome: "ok"},
		{User: "alice\x00", Token: "phone\xff", Action: "Send", SessionID: "s1", Detail: strings.Repeat("x", 3*store.MaxAuditDetailBytes), Outcome: "permission_denied"},
	} {
		if err := s.AddAudit(ctx, e); err != nil || e.ID == 0 {
			t.Fatalf("entry %d: id %d, %v", i, e.ID, err)
		}
	}
	if err := s.AddAudit(ctx, &store.AuditEntry{User: "x"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("an entry without an action: %v, want ErrInvalid", err)
	}
	all, err := s.Audit(ctx, store.AuditFilter{})
	if err != nil || len(all) != 3 || all[0].Action != "Send" || all[2].Action != "Decide" {
		t.Fatalf("Audit: %+v, %v", all, err)
	}
	if d := all[0].Detail; len(d) > store.MaxAuditDetailBytes+32 || !strings.Contains(d, "bytes)") {
		t.Errorf("a long detail was kept as %d bytes: %.60q", len(d), d)
	}
	if e := all[2]; e.User != "alice" || e.Token != "phone" || e.ClientKind != "page" || e.Remote != "127.0.0.1:5" || e.Detail != "allow Bash" || !e.At.Equal(t0.Truncate(time.Nanosecond)) {
		t.Errorf("read back %+v", e)
	}
	if got, _ := s.Audit(ctx, store.AuditFilter{User: "bob"}); len(got) != 1 || got[0].Action != "CreateSession" {
		t.Errorf("bob's: %+v", got)
	}
	if got, _ := s.Audit(ctx, store.AuditFilter{User: "alice"}); len(got) != 2 || all[0].User != "alice" { // its NUL dropped
		t.Errorf("alice's: %+v", got)
	}
	if got, _ := s.Audit(ctx, store.AuditFilter{SessionID: "s1"}); len(got) != 2 {
		t.Errorf("session s1's: %+v", got)
	}
	if got, _ := s.Audit(ctx, store.AuditFilter{Since: t0.Add(time.Minute)}); len(got) != 2 {
		t.Errorf("since: %+v", got)
	}
	if got, _ := s.Audit(ctx, store.AuditFilter{Limit: 1, BeforeID: all[0].ID}); len(got) != 1 || got[0].ID != all[1].ID {
		t.Errorf("paging: %+v", got)
	}
}
