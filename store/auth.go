package store

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Users and their API tokens, and the audit trail of who did what. The
// store keeps a token's SHA-256 only, never the token: package apiserver
// makes tokens, hashes them, and checks requests against the hashes.

// The limits on users, tokens and their fields. A token is looked up on
// every request from a copy each daemon keeps in memory, and a user or
// token name is shown in every audit line: they are bounded so that a
// client with the admin token cannot make either costly.
const (
	// MaxTokens is how many live (neither revoked nor expired) tokens a
	// store holds at most; CreateToken refuses one more with a
	// *LimitError. Revoked tokens are kept, so that a request carrying one
	// is told which it was, up to as many again: the oldest go first.
	// Expired ones are kept ExpiredKept.
	MaxTokens = 1000
	// ExpiredKept is how long a token is kept after it expired (a
	// sign-in's expires in hours): then CreateToken removes it.
	ExpiredKept = 30 * 24 * time.Hour
	// MaxUsers is how many users a store holds at most.
	MaxUsers = 1000
	// MaxNameBytes bounds a token's, a user's and a role's name.
	MaxNameBytes = 64
	// MaxScopeDirs bounds the directories one token is scoped to.
	MaxScopeDirs = 32
	// MaxFieldBytes bounds the other text fields: a scope directory, a
	// session id, an email, a subject, a group.
	MaxFieldBytes = 1024
	// MaxGroups bounds the groups a user is recorded in.
	MaxGroups = 64
	// MaxAuditDetailBytes bounds what an audit entry says of the request:
	// longer details are stored cut, with how long they were.
	MaxAuditDetailBytes = 2048
)

// A User is someone tokens belong to: named when a token is made for them
// (claudectl tokens create --user), or when they sign in through an
// identity provider, which also says their subject, email and groups.
type User struct {
	// Name is unique; required (MaxNameBytes).
	Name string
	// Subject is the identity provider's id of the person ("sub"), empty
	// for a user only named by an admin.
	Subject string
	Email   string
	Groups  []string
	// CreatedAt is set by the store.
	CreatedAt time.Time
}

// A Token is an API token as the store keeps it: its hash, never the
// token itself.
type Token struct {
	// ID is assigned by the store.
	ID int64
	// Name is unique among live tokens; required (MaxNameBytes). It is
	// what logs, the audit trail and a refusal name: never the secret.
	Name string
	// User is who it belongs to; required. CreateToken creates the user
	// when it is not stored yet.
	User string
	// Role is what it may do (package apiserver's role table); required.
	Role string
	// Dirs, when set, limit it to sessions whose directory is one of them
	// or below one (absolute, cleaned paths).
	Dirs []string
	// SessionID, when set, limits it to that session.
	SessionID string
	// Hash is the SHA-256 of the token; required, 32 bytes, unique.
	Hash []byte
	// ExpiresAt is when it stops working; zero for never.
	ExpiresAt time.Time
	// CreatedBy names the token that made it.
	CreatedBy string
	// CreatedAt is set by the store.
	CreatedAt time.Time
	// LastUsedAt is when a request last carried it, as recorded by
	// TouchTokens (a minute late at most); zero for never.
	LastUsedAt time.Time
	// RevokedAt is when it was revoked, zero while it is live; RevokedBy
	// names the token that revoked it.
	RevokedAt time.Time
	RevokedBy string
}

// Live reports whether t is neither revoked nor expired at now.
func (t *Token) Live(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

// An AuditEntry records one thing a client did through the API: who (the
// verified user and token), from where, how, to which session, and with
// what outcome.
type AuditEntry struct {
	// ID is assigned by the store; At is set to now when zero.
	ID int64
	At time.Time
	// User and Token are the verified user and token name.
	User  string
	Token string
	// ClientKind is what the client says it is ("page", "cli", "api"): a
	// hint, as is ClientHint, the name a client gives itself.
	ClientKind string
	ClientHint string
	// Remote is the client's address as the daemon saw it.
	Remote string
	// Action is what was done: the API method ("Decide", "CreateToken").
	Action string
	// SessionID is the session it concerned, if any.
	SessionID string
	// Detail says what of it matters (the decision, the rule, the token's
	// name and role), cut at MaxAuditDetailBytes.
	Detail string
	// Outcome is "ok", or the error code the client was answered.
	Outcome string
}

// AuditFilter selects audit entries, newest first.
type AuditFilter struct {
	// Since leaves out entries older than it; zero means all.
	Since time.Time
	// User and SessionID, when set, select one user's or one session's.
	User      string
	SessionID string
	// BeforeID pages backwards: only entries with a smaller ID.
	BeforeID int64
	// Limit caps the number returned; zero means 100.
	Limit int
}

// field checks one text field of a user or token: its length, and that it
// is valid UTF-8 without control characters (names end up in log lines
// and terminals).
func field(name, v string, max int) error {
	if len(v) > max {
		return fmt.Errorf("%w: %s is %d bytes long, the most is %d", ErrInvalid, name, len(v), max)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, name)
	}
	if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }) {
		return fmt.Errorf("%w: %s holds a control character", ErrInvalid, name)
	}
	return nil
}

// ValidateUser checks a user to store.
func ValidateUser(u *User) error {
	if u.Name == "" {
		return fmt.Errorf("%w: a user needs a name", ErrInvalid)
	}
	if len(u.Groups) > MaxGroups {
		return fmt.Errorf("%w: %d groups, the most is %d", ErrInvalid, len(u.Groups), MaxGroups)
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"user name", u.Name, MaxNameBytes}, {"subject", u.Subject, MaxFieldBytes}, {"email", u.Email, MaxFieldBytes}} {
		if err := field(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	for _, g := range u.Groups {
		if err := field("group", g, MaxFieldBytes); err != nil {
			return err
		}
	}
	return nil
}

// ValidateToken checks a token to store; it does not know the roles
// (package apiserver checks them), only that there is one.
func ValidateToken(t *Token) error {
	switch {
	case t.Name == "":
		return fmt.Errorf("%w: a token needs a name", ErrInvalid)
	case t.User == "":
		return fmt.Errorf("%w: a token needs a user", ErrInvalid)
	case t.Role == "":
		return fmt.Errorf("%w: a token needs a role", ErrInvalid)
	case len(t.Hash) != 32:
		return fmt.Errorf("%w: a token's hash is 32 bytes (SHA-256), not %d", ErrInvalid, len(t.Hash))
	case len(t.Dirs) > MaxScopeDirs:
		return fmt.Errorf("%w: %d scope directories, the most is %d", ErrInvalid, len(t.Dirs), MaxScopeDirs)
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"token name", t.Name, MaxNameBytes}, {"user name", t.User, MaxNameBytes}, {"role", t.Role, MaxNameBytes},
		{"session id", t.SessionID, MaxFieldBytes}, {"created by", t.CreatedBy, MaxNameBytes}} {
		if err := field(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	for _, d := range t.Dirs {
		if d == "" || d[0] != '/' {
			return fmt.Errorf("%w: scope directory %q is not an absolute path", ErrInvalid, d)
		}
		if err := field("scope directory", d, MaxFieldBytes); err != nil {
			return err
		}
	}
	return nil
}

// PrepareAudit sets an entry's time when zero, cuts its detail to
// MaxAuditDetailBytes and makes its text storable anywhere (valid UTF-8,
// no NUL): the trail keeps what it is given rather than lose an entry.
func PrepareAudit(e *AuditEntry) error {
	if e.Action == "" {
		return fmt.Errorf("%w: an audit entry needs an action", ErrInvalid)
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	if len(e.Detail) > MaxAuditDetailBytes {
		n := MaxAuditDetailBytes
		for n > 0 && !utf8.RuneStart(e.Detail[n]) {
			n--
		}
		e.Detail = fmt.Sprintf("%s… (%d bytes)", e.Detail[:n], len(e.Detail))
	}
	for _, p := range []*string{&e.User, &e.Token, &e.ClientKind, &e.ClientHint, &e.Remote, &e.Action, &e.SessionID, &e.Detail, &e.Outcome} {
		*p = strings.ReplaceAll(strings.ToValidUTF8(*p, "\uFFFD"), "\x00", "")
		if len(*p) > 4*MaxAuditDetailBytes {
			*p = (*p)[:4*MaxAuditDetailBytes]
			*p = strings.ToValidUTF8(*p, "")
		}
	}
	return nil
}
