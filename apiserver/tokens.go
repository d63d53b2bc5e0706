package apiserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/store"
)

// MaxTokenLifetime bounds expires_in_seconds: ten years.
const MaxTokenLifetime = 10 * 365 * 24 * time.Hour

// Whoami implements AuthService.
func (s *Service) Whoami(ctx context.Context, _ *connect.Request[v1.WhoamiRequest]) (*connect.Response[v1.WhoamiResponse], error) {
	id := IdentityOf(ctx)
	out := &v1.WhoamiResponse{User: id.User, Token: id.Token, Role: id.Role, Dirs: id.Dirs, SessionId: id.SessionID}
	for _, p := range roleTable[id.Role] {
		if id.Can(p) {
			out.Permissions = append(out.Permissions, string(p))
		}
	}
	if !id.ExpiresAt.IsZero() {
		out.ExpiresAt = timestamppb.New(id.ExpiresAt)
	}
	return connect.NewResponse(out), nil
}

// validName checks a token's or a user's name: letters, digits and
// . _ - @, at most store.MaxNameBytes, so that it reads the same in a
// terminal, a log line and a URL.
func validName(field, v string) error {
	if v == "" {
		return invalid(field, v, "required")
	}
	if len(v) > store.MaxNameBytes {
		return invalid(field, clip(v), fmt.Sprintf("at most %d bytes", store.MaxNameBytes))
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@", r)) {
			return invalid(field, v, "letters, digits, '.', '_', '-' and '@' only")
		}
	}
	return nil
}

func (s *Service) tokensStore() (store.Store, error) {
	if s.Store == nil || s.Auth == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("this daemon keeps no tokens of its own: only its token file's"))
	}
	return s.Store, nil
}

// CreateToken implements AuthService.
func (s *Service) CreateToken(ctx context.Context, req *connect.Request[v1.CreateTokenRequest]) (*connect.Response[v1.CreateTokenResponse], error) {
	m := req.Msg
	db, err := s.tokensStore()
	if err != nil {
		return nil, err
	}
	if err := validName("name", m.Name); err != nil {
		return nil, err
	}
	if m.Name == BootstrapName || m.Name == "worker_token" {
		return nil, invalid("name", m.Name, "names the daemon's own token: choose another")
	}
	if RolePermissions(m.Role) == nil {
		return nil, invalid("role", m.Role, "not a role: one of "+strings.Join(Roles(), ", "))
	}
	user := m.User
	if user == "" {
		user = m.Name
	}
	if err := validName("user", user); err != nil {
		return nil, err
	}
	t := &store.Token{Name: m.Name, User: user, Role: m.Role, SessionID: m.SessionId, CreatedBy: IdentityOf(ctx).Token}
	switch {
	case m.ExpiresInSeconds < 0:
		return nil, invalid("expires_in_seconds", strconv.FormatInt(m.ExpiresInSeconds, 10), "is in the past: give a positive duration, or 0 for never")
	case time.Duration(m.ExpiresInSeconds) > MaxTokenLifetime/time.Second:
		return nil, invalid("expires_in_seconds", strconv.FormatInt(m.ExpiresInSeconds, 10), "at most ten years")
	case m.ExpiresInSeconds > 0:
		t.ExpiresAt = time.Now().Add(time.Duration(m.ExpiresInSeconds) * time.Second)
	}
	if len(m.Dirs) > store.MaxScopeDirs {
		return nil, invalid("dirs", strconv.Itoa(len(m.Dirs))+" directories", fmt.Sprintf("at most %d", store.MaxScopeDirs))
	}
	for _, d := range m.Dirs {
		real, err := scopeDir(d)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(t.Dirs, real) {
			t.Dirs = append(t.Dirs, real)
		}
	}
	if t.SessionID != "" {
		sess, err := s.D.Session(ctx, t.SessionID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, invalid("session_id", clip(t.SessionID), "no such session (claudectl sessions lists them)")
		}
		if err != nil {
			return nil, toConnect(err)
		}
		t.SessionID = sess.ID
	}
	if (len(t.Dirs) > 0 || t.SessionID != "") && (t.Role == RoleAdmin || t.Role == RoleWorker) {
		return nil, invalid("role", t.Role, "cannot be scoped (dirs, session_id): an admin's rules and tokens reach every session, and a worker's scope is its own sessions; use operator, approver or viewer")
	}
	secret := NewTokenSecret()
	t.Hash = HashToken(secret)
	if err := db.CreateToken(ctx, t); err != nil {
		switch le := (*store.LimitError)(nil); {
		case errors.Is(err, store.ErrExists):
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf(
				"name %q: a live token has that name already (claudectl tokens list shows them; revoke it first, or choose another)", t.Name))
		case errors.As(err, &le):
			return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%v (claudectl tokens revoke NAME removes one)", le))
		}
		return nil, toConnect(err)
	}
	if err := s.Auth.Reload(ctx); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.CreateTokenResponse{Secret: secret, Token: tokenToProto(t)}), nil
}

// scopeDir checks a scope directory and returns it as the file system
// resolves it (symlinks followed).
func scopeDir(d string) (string, error) {
	if !filepath.IsAbs(d) {
		return "", invalid("dirs", clip(d), "must be an absolute path")
	}
	if len(d) > store.MaxFieldBytes {
		return "", invalid("dirs", clip(d), fmt.Sprintf("at most %d bytes", store.MaxFieldBytes))
	}
	fi, err := os.Stat(d)
	switch {
	case err != nil:
		return "", invalid("dirs", clip(d), "no such directory on the daemon's machine")
	case !fi.IsDir():
		return "", invalid("dirs", clip(d), "not a directory")
	}
	real, err := filepath.EvalSymlinks(d)
	if err != nil {
		return "", invalid("dirs", clip(d), err.Error())
	}
	return real, nil
}

func tokenToProto(t *store.Token) *v1.TokenInfo {
	ts := func(t time.Time) *timestamppb.Timestamp {
		if t.IsZero() {
			return nil
		}
		return timestamppb.New(t)
	}
	return &v1.TokenInfo{Name: t.Name, User: t.User, Role: t.Role, Dirs: t.Dirs, SessionId: t.SessionID,
		ExpiresAt: ts(t.ExpiresAt), CreatedBy: t.CreatedBy, CreatedAt: ts(t.CreatedAt), LastUsedAt: ts(t.LastUsedAt),
		RevokedAt: ts(t.RevokedAt), RevokedBy: t.RevokedBy}
}

// ListTokens implements AuthService.
func (s *Service) ListTokens(ctx context.Context, req *connect.Request[v1.ListTokensRequest]) (*connect.Response[v1.ListTokensResponse], error) {
	db, err := s.tokensStore()
	if err != nil {
		return nil, err
	}
	ts, err := db.Tokens(ctx)
	if err != nil {
		return nil, toConnect(err)
	}
	out := &v1.ListTokensResponse{}
	for _, t := range ts {
		if t.RevokedAt.IsZero() || req.Msg.IncludeRevoked {
			out.Tokens = append(out.Tokens, tokenToProto(t))
		}
	}
	return connect.NewResponse(out), nil
}

// RevokeToken implements AuthService.
func (s *Service) RevokeToken(ctx context.Context, req *connect.Request[v1.RevokeTokenRequest]) (*connect.Response[v1.RevokeTokenResponse], error) {
	db, err := s.tokensStore()
	if err != nil {
		return nil, err
	}
	if err := required("name", req.Msg.Name); err != nil {
		return nil, err
	}
	t, err := db.RevokeToken(ctx, req.Msg.Name, IdentityOf(ctx).Token)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("no live token called %q (claudectl tokens list shows them)", clip(req.Msg.Name))
	}
	if err != nil {
		return nil, toConnect(err)
	}
	// Refused from the next request on, here; the other daemons sharing
	// the store are told by the store (WatchTokens).
	if err := s.Auth.Reload(ctx); err != nil {
		return nil, toConnect(err)
	}
	return connect.NewResponse(&v1.RevokeTokenResponse{Token: tokenToProto(t)}), nil
}

// MaxAuditEntries is the most ListAudit returns at once.
const MaxAuditEntries = 1000

// ListAudit implements AuthService.
func (s *Service) ListAudit(ctx context.Context, req *connect.Request[v1.ListAuditRequest]) (*connect.Response[v1.ListAuditResponse], error) {
	m := req.Msg
	if s.Store == nil {
		return connect.NewResponse(&v1.ListAuditResponse{}), nil
	}
	if m.Limit < 0 || m.Limit > MaxAuditEntries {
		return nil, invalid("limit", strconv.Itoa(int(m.Limit)), fmt.Sprintf("must be 0 (100) to %d", MaxAuditEntries))
	}
	f := store.AuditFilter{User: m.User, SessionID: m.SessionId, Limit: int(m.Limit)}
	if m.Since != nil {
		if err := m.Since.CheckValid(); err != nil {
			return nil, invalid("since", m.Since.String(), err.Error())
		}
		f.Since = m.Since.AsTime()
	}
	es, err := s.Store.Audit(ctx, f)
	if err != nil {
		return nil, toConnect(err)
	}
	out := &v1.ListAuditResponse{}
	for _, e := range es {
		out.Entries = append(out.Entries, &v1.AuditEntry{Id: e.ID, At: timestamppb.New(e.At), User: e.User, Token: e.Token,
			ClientKind: e.ClientKind, ClientHint: e.ClientHint, Remote: e.Remote, Action: e.Action, SessionId: e.SessionID,
			Detail: e.Detail, Outcome: e.Outcome})
	}
	return connect.NewResponse(out), nil
}
