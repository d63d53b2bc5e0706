package apiserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/claudectl/claudectl/store"
)

// TokenPrefix starts every token the daemon makes, so that secret
// scanners (and people) recognise one that leaked.
const TokenPrefix = "cctl_"

// NewTokenSecret returns a new token: TokenPrefix and 256 random bits,
// base64url.
func NewTokenSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// HashToken is what the store keeps of a token: its SHA-256.
func HashToken(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// AuthOptions configures NewAuth.
type AuthOptions struct {
	// Token is the daemon's own (bootstrap) token: an admin. Required.
	Token string
	// WorkerToken is the shared token of remote workers; "" for none.
	WorkerToken string
	// Store holds the other tokens; nil means the bootstrap token alone.
	// When it is a store.Watcher, the tokens other daemons create or
	// revoke are reloaded as it tells.
	Store store.Store
	// Logger receives failures to load tokens or record their use, and
	// the rate limiter's warnings; nil means slog.Default().
	Logger *slog.Logger
	// FailureBurst and FailureInterval shape the limit on failed
	// authentications per remote address: FailureBurst at once, then one
	// per FailureInterval. Zero means DefaultFailureBurst and
	// DefaultFailureInterval.
	FailureBurst    int
	FailureInterval time.Duration
	// TouchInterval is how often the tokens' last use is written to the
	// store; zero means a minute.
	TouchInterval time.Duration
	// Groups are the groups of users the settings name
	// (permissions.groups), besides those an identity provider gives.
	Groups map[string][]string
}

// The default limit on failed authentications per remote address.
const (
	DefaultFailureBurst    = 20
	DefaultFailureInterval = time.Second
)

// Auth verifies the tokens of requests: the bootstrap token, the worker
// token, and the tokens in the store, which it keeps in memory (a request
// costs a SHA-256 and a map lookup, no query) and reloads when one is
// created or revoked, here or, for a shared store, by another daemon. It
// limits failed authentications per remote address, and records when
// each token was last used, in the store every TouchInterval.
type Auth struct {
	bootstrap, worker string
	db                store.Store
	log               *slog.Logger
	limiter           *failureLimiter
	touchEvery        time.Duration

	mu     sync.Mutex
	tokens map[[32]byte]*store.Token // by hash; guarded by mu
	used   map[int64]time.Time       // not yet written; guarded by mu
	users  map[string][]string       // each user's groups from the store; guarded by mu
	groups map[string][]string       // the settings' groups: group → users

	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

// NewAuth returns an Auth that has loaded the store's tokens; Close stops
// its goroutines. ctx covers the loading.
func NewAuth(ctx context.Context, o *AuthOptions) (*Auth, error) {
	var opts AuthOptions
	if o != nil {
		opts = *o
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &Auth{bootstrap: opts.Token, worker: opts.WorkerToken, db: opts.Store, log: opts.Logger,
		limiter:    newFailureLimiter(opts.FailureBurst, opts.FailureInterval, opts.Logger),
		touchEvery: opts.TouchInterval, used: map[int64]time.Time{}, stop: make(chan struct{}), groups: opts.Groups}
	if a.touchEvery <= 0 {
		a.touchEvery = time.Minute
	}
	if a.db == nil {
		return a, nil
	}
	if err := a.Reload(ctx); err != nil {
		return nil, err
	}
	var watch <-chan struct{}
	if w, ok := a.db.(store.Watcher); ok {
		var end func()
		watch, end = w.WatchTokens()
		a.done.Go(func() {
			<-a.stop
			end()
		})
	}
	a.done.Go(func() { a.loop(watch) })
	return a, nil
}

// loop reloads the tokens when watch says so, and writes their last use.
func (a *Auth) loop(watch <-chan struct{}) {
	tick := time.NewTicker(a.touchEvery)
	defer tick.Stop()
	for {
		select {
		case <-a.stop:
			a.touch()
			return
		case <-watch:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := a.Reload(ctx); err != nil {
				a.log.Warn("reloading the API tokens after another daemon changed them failed; the ones known are used meanwhile", "err", err)
			}
			cancel()
		case <-tick.C:
			a.touch()
		}
	}
}

// touch writes the last use of the tokens used since the last time.
func (a *Auth) touch() {
	a.mu.Lock()
	used := a.used
	a.used = map[int64]time.Time{}
	a.mu.Unlock()
	if len(used) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.db.TouchTokens(ctx, used); err != nil {
		a.log.Warn("recording when API tokens were last used failed", "tokens", len(used), "err", err)
	}
}

// Close stops the watch and writes the tokens' last use. Idempotent.
func (a *Auth) Close() {
	a.once.Do(func() { close(a.stop) })
	a.done.Wait()
}

// Reload reads the store's tokens again: a token created or revoked is
// known, or refused, from the next request on.
func (a *Auth) Reload(ctx context.Context) error {
	if a.db == nil {
		return nil
	}
	ts, err := a.db.Tokens(ctx)
	if err != nil {
		return fmt.Errorf("loading the API tokens: %w", err)
	}
	m := make(map[[32]byte]*store.Token, len(ts))
	for _, t := range ts {
		if len(t.Hash) == 32 {
			m[[32]byte(t.Hash)] = t
		}
	}
	// Each user's groups, as sign-in stored them, for routes that ask
	// groups (reach.go). A user signs in by making a token, so the tokens'
	// reload is when they change.
	us, err := a.db.Users(ctx)
	if err != nil {
		return fmt.Errorf("loading the users: %w", err)
	}
	users := make(map[string][]string, len(us))
	for _, u := range us {
		users[u.Name] = u.Groups
	}
	a.mu.Lock()
	a.tokens = m
	a.users = users
	a.mu.Unlock()
	return nil
}

// An authError is why a request's token was refused, in words that may
// be shown to whoever sent it: never the token.
type authError struct {
	msg string
	// limited is set when the remote address made too many failed
	// attempts: nothing was checked.
	limited bool
}

func (e *authError) Error() string { return e.msg }

var errBadToken = &authError{msg: "missing or bad bearer token"}

// verify returns the identity of token, presented from remote. A token
// that is not known, revoked or expired counts against remote's
// allowance of failures; past it, nothing is checked until it refills.
func (a *Auth) verify(token, remote string) (*Identity, error) {
	host := hostOf(remote)
	if token == "" {
		return nil, errBadToken // nothing guessed: not counted
	}
	if wait := a.limiter.blocked(host); wait > 0 {
		return nil, &authError{limited: true, msg: fmt.Sprintf(
			"too many failed authentications from %s: try again in %s", host, wait.Round(time.Second)+time.Second)}
	}
	if tokenIs(token, a.bootstrap) {
		return &Identity{User: BootstrapName, Token: BootstrapName, Role: RoleAdmin, Bootstrap: true}, nil
	}
	// The shared worker token is not the API's: refused here as any
	// other (workerOK takes it at the worker path).
	t := a.lookup(token)
	now := time.Now()
	switch {
	case t == nil:
		a.limiter.fail(host)
		return nil, errBadToken
	case !t.RevokedAt.IsZero():
		a.limiter.fail(host)
		return nil, &authError{msg: fmt.Sprintf("token %q was revoked at %s by %s: ask an admin for a new one",
			t.Name, t.RevokedAt.Local().Format(time.DateTime), t.RevokedBy)}
	case !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt):
		a.limiter.fail(host)
		return nil, &authError{msg: fmt.Sprintf("token %q expired at %s: ask an admin for a new one",
			t.Name, t.ExpiresAt.Local().Format(time.DateTime))}
	}
	a.mu.Lock()
	a.used[t.ID] = now
	a.mu.Unlock()
	return &Identity{User: t.User, Token: t.Name, Role: t.Role, Dirs: t.Dirs, SessionID: t.SessionID, ExpiresAt: t.ExpiresAt}, nil
}

// lookup finds a store token by its hash.
func (a *Auth) lookup(token string) *store.Token {
	if !strings.HasPrefix(token, TokenPrefix) {
		return nil
	}
	h := [32]byte(HashToken(token))
	a.mu.Lock()
	t := a.tokens[h]
	a.mu.Unlock()
	// The map lookup keys on the hash, which tells nothing of the token;
	// the comparison is for form's sake, in constant time.
	if t == nil || subtle.ConstantTimeCompare(t.Hash, h[:]) != 1 {
		return nil
	}
	return t
}

// workerOK reports whether token may connect a remote worker: the shared
// worker token, or a live token of role worker. It only tells the
// connection guard that the connection carried a token: the worker
// listener decides (through WorkerVerifier, which counts failures), so
// a wrong token is not counted twice.
func (a *Auth) workerOK(token string) bool {
	if token == "" {
		return false
	}
	if a.worker != "" && tokenIs(token, a.worker) {
		return true
	}
	t := a.lookup(token)
	return t != nil && t.Role == RoleWorker && t.Live(time.Now())
}

// refuseWorker counts a worker's token that workerOK refused as a failed
// authentication from remote, as the API counts one, and reports whether
// remote is blocked for too many.
func (a *Auth) refuseWorker(token, remote string) (limited bool) {
	_, err := a.verify(token, remote)
	var ae *authError
	return errors.As(err, &ae) && ae.limited
}

// WorkerVerifier returns what the worker listener checks a worker's
// token with (claude.WorkerListener.Authorize): a live token of role
// worker.
func (a *Auth) WorkerVerifier() func(token, remote string) bool {
	return func(token, remote string) bool {
		id, err := a.verify(token, remote)
		return err == nil && id.Role == RoleWorker
	}
}

// hostOf is the address part of host:port.
func hostOf(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// failureLimiter is a token bucket per remote address, spent by failed
// authentications: burst at once, then one per interval. It holds at most
// maxTracked addresses (a flood from many addresses forgets the fullest
// buckets first), and warns at most once a minute.
type failureLimiter struct {
	burst    float64
	interval time.Duration
	log      *slog.Logger

	mu       sync.Mutex
	buckets  map[string]*bucket
	refused  int       // since the last warning
	latest   string    // the latest address refused
	warnedAt time.Time // the last warning
}

type bucket struct {
	tokens float64
	at     time.Time
}

const maxTracked = 10_000

func newFailureLimiter(burst int, interval time.Duration, log *slog.Logger) *failureLimiter {
	if burst <= 0 {
		burst = DefaultFailureBurst
	}
	if interval <= 0 {
		interval = DefaultFailureInterval
	}
	return &failureLimiter{burst: float64(burst), interval: interval, log: log, buckets: map[string]*bucket{}}
}

// refill brings b up to now; l.mu is held.
func (l *failureLimiter) refill(b *bucket, now time.Time) {
	b.tokens = min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.interval))
	b.at = now
}

// blocked returns how long host must wait before its next attempt is
// checked: 0 when it may try now.
func (l *failureLimiter) blocked(host string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[host]
	if b == nil {
		return 0
	}
	now := time.Now()
	l.refill(b, now)
	if b.tokens >= 1 {
		return 0
	}
	l.refused++
	l.latest = host
	if now.Sub(l.warnedAt) >= time.Minute {
		l.log.Warn("refusing requests from an address that failed to authenticate too often", "remote", host,
			"refused_since_last_warning", l.refused, "limit", fmt.Sprintf("%d failures, then one per %s", int(l.burst), l.interval),
			"fix", "if it is your client, give it a valid token (claudectl whoami checks one); else someone is guessing tokens")
		l.refused, l.warnedAt = 0, now
	}
	return time.Duration((1 - b.tokens) * float64(l.interval))
}

// fail spends one of host's attempts.
func (l *failureLimiter) fail(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	b := l.buckets[host]
	if b == nil {
		if len(l.buckets) >= maxTracked {
			l.forget(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[host] = b
	}
	l.refill(b, now)
	b.tokens = max(0, b.tokens-1)
}

// forget drops the buckets that are full again, or, if none is, all: a
// flood from that many addresses is not held back by memory. l.mu is
// held.
func (l *failureLimiter) forget(now time.Time) {
	for h, b := range l.buckets {
		l.refill(b, now)
		if b.tokens >= l.burst {
			delete(l.buckets, h)
		}
	}
	if len(l.buckets) >= maxTracked {
		clear(l.buckets)
	}
}
