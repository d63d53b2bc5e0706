package store

import (
	"context"
	"encoding/json"
	"iter"
	"time"
)

// Store is what the daemon keeps its records in. [github.com/claudectl/claudectl/store/sqlite]
// implements it; the daemon and the API use nothing else of an engine, so
// another implementation (a server database shared by several daemons)
// can stand in. Every method is safe for concurrent use. Errors wrap the
// sentinels of this package: [ErrNotFound], [ErrInvalid], [ErrClosed],
// [ErrUnavailable], [ErrWriteFailed].
type Store interface {
	// CreateSession stores s, setting its ID (when empty), its pk and its
	// times.
	CreateSession(ctx context.Context, s *Session) error
	// Session returns a session with LastSeq, the seq of its last event.
	Session(ctx context.Context, id string) (*Session, error)
	// Sessions returns the sessions f selects, newest first.
	Sessions(ctx context.Context, f SessionFilter) ([]*Session, error)
	// UpdateSession applies upd and returns the session as it is after.
	UpdateSession(ctx context.Context, id string, upd SessionUpdate) (*Session, error)
	// DeleteSession removes a session with its events, usage and rules.
	DeleteSession(ctx context.Context, id string) error
	// MarkRunningInterrupted marks the sessions stored as running (their
	// CLIs died with the last daemon) interrupted and returns their ids.
	MarkRunningInterrupted(ctx context.Context) ([]string, error)
	// NewProcess starts a new CLI process generation of a session (for the
	// usage ledger) and returns its number.
	NewProcess(ctx context.Context, id string) (int64, error)

	// Append stores ev at the end of its session's log and returns its
	// seq (also set in ev.Seq), once it is durable: a seq is returned if
	// and only if the event is stored. Seqs are gap-free per session, from
	// 1, in the order appends were queued.
	Append(ctx context.Context, ev *Event) (int64, error)
	// AppendBatch stores evs in order, all or none, with Append's contract
	// for each.
	AppendBatch(ctx context.Context, evs ...*Event) error
	// AppendAsync queues evs and returns; done is called exactly once,
	// in queueing order, with nil once they are durable (each with its
	// Seq) or the error. done must not block or append. ctx covers the
	// queueing only.
	AppendAsync(ctx context.Context, done func(error), evs ...*Event) error
	// AppendUpdateAsync is AppendAsync for one event that also applies upd
	// to its session, durable together.
	AppendUpdateAsync(ctx context.Context, done func(error), ev *Event, upd SessionUpdate) error
	// AppendResultAsync is AppendAsync for a result line that also enters
	// it in the usage ledger as the session's next turn, adds the turn to
	// the session's totals (its share computed as TurnUsage says, from the
	// last entry of the same process) and stores what follow says after it
	// (nil: nothing), durable together: the only way into the ledger. done
	// gets the ledger record and the session after the turn, of which only
	// ID, BudgetUSD and Totals are sure to be set (what a turn's end
	// reads), or the error (ErrNotFound for an unknown session).
	AppendResultAsync(ctx context.Context, done func(*UsageRecord, *Session, error), ev *Event, in UsageInput, follow *ResultFollow) error
	// Events yields the events of session id after seq after, gap-free or
	// failing up front with ErrUnavailable, ending with the last event
	// stored when it was called.
	Events(ctx context.Context, id string, after int64) iter.Seq2[Event, error]

	// Usage returns the ledger of a session, oldest turn first.
	Usage(ctx context.Context, id string) ([]*UsageRecord, error)
	// SpendSince sums the ledger's cost of the turns recorded at t or
	// later, in all and by session directory.
	SpendSince(ctx context.Context, t time.Time) (*Spend, error)

	// QueuePrompt keeps text for session id after the prompts it keeps
	// already and returns its Seq (ErrNotFound for an unknown session).
	QueuePrompt(ctx context.Context, id, text string) (int64, error)
	// QueuedPrompts returns the prompts session id keeps, oldest first.
	QueuedPrompts(ctx context.Context, id string) ([]*QueuedPrompt, error)
	// DropQueuedPrompt forgets prompt seq of session id (it was sent);
	// forgetting one that is not kept is no error.
	DropQueuedPrompt(ctx context.Context, id string, seq int64) error
	// RaiseBudget stores r, replacing the raise of the same Cap, Scope and
	// Day; At is set when zero.
	RaiseBudget(ctx context.Context, r *BudgetRaise) error
	// BudgetRaises returns the raises of day and those of sessions (Day "").
	BudgetRaises(ctx context.Context, day string) ([]*BudgetRaise, error)
	// UsageSince returns the ledger entries of every session made at or
	// after since, oldest first, at most limit of them (the newest are
	// left out past it); each with its SessionID.
	UsageSince(ctx context.Context, since time.Time, limit int) ([]*UsageRecord, error)

	// Search returns the events of every session (or of q.SessionID) whose
	// indexed text holds every word of q, newest first (see SearchQuery).
	// Events are indexed in the background, off the writer's path: an
	// event is found a moment after it is stored, not at once. Errors
	// wrap ErrInvalid for a query ParseSearch refuses.
	Search(ctx context.Context, q SearchQuery) ([]*SearchHit, error)

	// CreateRule stores a permission rule, setting its ID (that of an
	// equal rule if one is stored). It fails with a *LimitError when the
	// store holds MaxRules rules already.
	CreateRule(ctx context.Context, r *Rule) error
	// Rules returns every stored rule.
	Rules(ctx context.Context) ([]*Rule, error)
	// DeleteRule removes a rule.
	DeleteRule(ctx context.Context, id int64) error
	// AddDecision records a permission decision in the audit trail.
	AddDecision(ctx context.Context, d *Decision) error
	// Decisions returns the decisions f selects, newest first.
	Decisions(ctx context.Context, f DecisionFilter) ([]*Decision, error)

	// PutUser stores u, or updates the subject, email and groups of the
	// user of that name; it sets u.CreatedAt. It fails with a *LimitError
	// when the store holds MaxUsers users already.
	PutUser(ctx context.Context, u *User) error
	// Users returns every user, by name.
	Users(ctx context.Context) ([]*User, error)
	// CreateToken stores t, setting its ID and CreatedAt, and creates its
	// user when none of that name is stored. It fails with an error
	// wrapping ErrExists when a live token has its name, and with a
	// *LimitError when the store holds MaxTokens live tokens already.
	CreateToken(ctx context.Context, t *Token) error
	// Tokens returns every token, revoked ones included, oldest first.
	Tokens(ctx context.Context) ([]*Token, error)
	// RevokeToken revokes the live token called name (by names who did)
	// and returns it as it is after. ErrNotFound when there is none.
	RevokeToken(ctx context.Context, name, by string) (*Token, error)
	// TouchTokens records when tokens were last used: each one's
	// LastUsedAt becomes the later of the stored and the given time.
	TouchTokens(ctx context.Context, used map[int64]time.Time) error
	// AddAudit appends e to the audit trail (see PrepareAudit), setting
	// its ID.
	AddAudit(ctx context.Context, e *AuditEntry) error
	// Audit returns the entries f selects, newest first.
	Audit(ctx context.Context, f AuditFilter) ([]*AuditEntry, error)

	// WriteHealth reports the latest write failure caused by the storage
	// itself (not by a record), until a write succeeds.
	WriteHealth() WriteHealth
	// Close waits for queued appends, stops taking new ones and releases
	// the store. Idempotent.
	Close() error
}

// A Watcher is a store that several daemons share, which tells a daemon
// when another one appended to a session's log, so that it can follow
// sessions it does not run. [github.com/claudectl/claudectl/store/postgres]
// implements it.
type Watcher interface {
	// WatchEvents returns a channel that receives a value (one pending
	// at most) after events of session id were committed by any writer,
	// and a function that ends the watch. Notifications can be missed
	// (a reconnection): a follower also polls.
	WatchEvents(id string) (<-chan struct{}, func())
	// WatchRules returns a channel that receives a value after any daemon
	// added or removed a permission rule (and after a reconnection), and
	// a function that ends the watch.
	WatchRules() (<-chan struct{}, func())
	// WatchTokens returns a channel that receives a value after any daemon
	// created or revoked a token (and after a reconnection), and a
	// function that ends the watch.
	WatchTokens() (<-chan struct{}, func())
}

// A Leaser is a store that several daemons share, whose sessions are each
// run by one daemon at a time: the daemon acquires a session's lease
// before it runs its CLI, renews its leases by heartbeat, and releases a
// lease when the CLI stops. Its writes of a session it acquired are refused
// with an error wrapping [ErrNotOwner] once another daemon has taken the
// session over. [github.com/claudectl/claudectl/store/postgres] implements
// it.
type Leaser interface {
	// Owner names this daemon in the leases.
	Owner() string
	// Acquire takes session id's lease for ttl if it is free, expired or
	// this daemon's, and returns the fencing number its writes carry.
	// Errors wrap ErrNotOwner while another daemon holds it.
	Acquire(ctx context.Context, id string, ttl time.Duration) (int64, error)
	// Renew extends this daemon's leases by ttl and returns the sessions
	// it lost to another daemon.
	Renew(ctx context.Context, ttl time.Duration) ([]string, error)
	// Release gives up session id's lease.
	Release(ctx context.Context, id string) error
	// LeaseOf says who holds session id's lease and until when; owner is
	// "" when nobody does. A lease whose until has passed is free.
	LeaseOf(ctx context.Context, id string) (owner string, until time.Time, err error)
}

// A Command is a client's command carried from the daemon that received it
// to the daemon that can carry it out (see [Commander]).
type Command struct {
	ID int64
	// Owner is the daemon it is for; "" for whichever daemon holds what
	// it names (a permission request).
	Owner   string
	Session string
	Kind    string
	Payload json.RawMessage
	// Sender is the daemon that stored it.
	Sender    string
	CreatedAt time.Time
}

// A Commander is a store that carries commands between the daemons sharing
// it: the sender stores a command and waits for its result; the daemon it
// is for is woken, claims it (once: no command is carried out twice),
// carries it out and stores the result.
type Commander interface {
	// SendCommand stores c (setting its ID, Sender and CreatedAt) and
	// wakes the daemons it may be for.
	SendCommand(ctx context.Context, c *Command) error
	// WaitCommand waits until command id has a result and returns it.
	WaitCommand(ctx context.Context, id int64) (json.RawMessage, error)
	// OpenCommands returns the commands not yet claimed that are for this
	// daemon or for any, oldest first.
	OpenCommands(ctx context.Context) ([]*Command, error)
	// WatchCommands returns a channel that receives a value when commands
	// may be waiting, and a function that ends the watch.
	WatchCommands() (<-chan struct{}, func())
	// ClaimCommand takes command id for this daemon; false when another
	// daemon took it first.
	ClaimCommand(ctx context.Context, id int64) (bool, error)
	// FinishCommand stores the result of a claimed command and wakes its
	// sender.
	FinishCommand(ctx context.Context, id int64, result json.RawMessage) error
	// WithdrawCommand ends command id unclaimed, so that no daemon
	// carries it out; false when a daemon claimed it first.
	WithdrawCommand(ctx context.Context, id int64) (bool, error)
}

// A PendingRequest is a permission request waiting for a person, as the
// daemon holding it published it (see [PendingBoard]).
type PendingRequest struct {
	RequestID string
	SessionID string
	// Owner is the daemon holding it.
	Owner string
	// Request is the request as the CLI sent it (claude.PermissionRequest
	// as JSON).
	Request   json.RawMessage
	CreatedAt time.Time
}

// A PendingBoard is a store that lists, for every daemon sharing it, the
// permission requests the others hold.
type PendingBoard interface {
	// PutPending publishes a request this daemon holds.
	PutPending(ctx context.Context, p *PendingRequest) error
	// DropPending removes a request once it is settled.
	DropPending(ctx context.Context, requestID string) error
	// OthersPending returns the requests other daemons hold for session
	// id ("" for every session), oldest first; requests of a daemon that
	// no longer holds the session's lease are left out.
	OthersPending(ctx context.Context, sessionID string) ([]*PendingRequest, error)
	// WatchPending returns a channel that receives a value after any
	// daemon published or removed a request, and a function that ends
	// the watch.
	WatchPending() (<-chan struct{}, func())
}

// A Tailer is a store that several daemons share, which reads the new
// events of many sessions at once: a daemon following the sessions other
// daemons run reads them with one query per wake-up, not one per session.
type Tailer interface {
	// EventsAfter returns, for each session id of after, its events after
	// the seq given, in order and without a gap, up to about limit events
	// in all (a session's may be cut short: ask again from its last).
	EventsAfter(ctx context.Context, after map[string]int64, limit int) (map[string][]Event, error)
	// WatchAllEvents returns a channel that receives a value (one pending
	// at most) after events of any session were committed, and a function
	// that ends the watch.
	WatchAllEvents() (<-chan struct{}, func())
}
