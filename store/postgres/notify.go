package postgres

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Live events across daemons: the writer ends every batch's transaction
// with a NOTIFY on eventsChannel for each session it appended to (the
// session's id, never an event), which PostgreSQL delivers at commit. A
// listener per DB, on a connection of its own, wakes the watchers of those
// sessions, who read the new events from the table. A notification can be
// missed (the listener's connection drops), so watchers also poll; after
// a reconnection every watcher is woken.
const eventsChannel = "claudectl_events"

// The channels of commands between daemons: commandsChannel's payload is
// the daemon a command is for ("" for any), doneChannel's the id of a
// command that has its result.
const (
	commandsChannel = "claudectl_commands"
	doneChannel     = "claudectl_command_done"
)

// rulesChannel carries a notification (no payload) after a permission rule
// was added or removed.
const rulesChannel = "claudectl_rules"

// WatchRules returns a channel that receives a value after any daemon
// writing to this database added or removed a permission rule, and after
// the listener reconnected, and a function that ends the watch.
func (db *DB) WatchRules() (<-chan struct{}, func()) { return db.watch(rulesChannel + "\x00") }

// notifyStatement is run by the writer in each batch's transaction.
const notifyStatement = `SELECT pg_notify('` + eventsChannel + `', id) FROM unnest($1::text[]) AS id`

// listener delivers notifications to the watchers of sessions.
type listener struct {
	db *DB

	mu       sync.Mutex
	watchers map[string]map[chan struct{}]struct{}
	started  bool
	cancel   context.CancelFunc
	done     chan struct{}
}

// WatchEvents returns a channel that receives a value (coalesced: one
// pending at most) after events of session id were committed by any
// daemon writing to this database, and a function that stops the watch.
// A notification can be missed while the listening connection is down:
// a watcher that must not miss events also polls (the channel receives a
// value after every reconnection too).
func (db *DB) WatchEvents(id string) (<-chan struct{}, func()) {
	return db.watch(eventsChannel + "\x00" + id)
}

// allEventsKey is the watcher key of every session's events.
const allEventsKey = eventsChannel + "\x01*"

// WatchAllEvents returns a channel that receives a value after events of
// any session were committed by any daemon, and a function that stops the
// watch.
func (db *DB) WatchAllEvents() (<-chan struct{}, func()) { return db.watch(allEventsKey) }

// watch registers a watcher of key (a channel, NUL, a payload).
func (db *DB) watch(key string) (<-chan struct{}, func()) {
	l := &db.listen
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	if l.watchers == nil {
		l.watchers = map[string]map[chan struct{}]struct{}{}
	}
	if l.watchers[key] == nil {
		l.watchers[key] = map[chan struct{}]struct{}{}
	}
	l.watchers[key][ch] = struct{}{}
	if !l.started && !db.closed.Load() {
		l.started = true
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel, l.done, l.db = cancel, make(chan struct{}), db
		go l.run(ctx)
	}
	l.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.watchers[key], ch)
			if len(l.watchers[key]) == 0 {
				delete(l.watchers, key)
			}
			l.mu.Unlock()
		})
	}
}

// wake signals the watchers of key, or every watcher when key is "".
func (l *listener) wake(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	signal := func(set map[chan struct{}]struct{}) {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	if key != "" {
		signal(l.watchers[key])
		return
	}
	for _, set := range l.watchers {
		signal(set)
	}
}

// wakePrefix signals the watchers of every key with prefix.
func (l *listener) wakePrefix(prefix string) {
	l.mu.Lock()
	keys := make([]string, 0, len(l.watchers))
	for k := range l.watchers {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	l.mu.Unlock()
	for _, k := range keys {
		l.wake(k)
	}
}

// run listens until ctx ends, reconnecting with backoff.
func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		l.db.log("listening for other daemons' events failed; retrying", err)
		l.wake("") // whatever was missed: read again
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listen holds one LISTEN connection until it fails or ctx ends.
func (l *listener) listen(ctx context.Context) error {
	conn, err := l.db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection is the listener's for good: it is not returned to
	// the pool with a LISTEN on it.
	c := conn.Hijack()
	defer c.Close(context.Background())
	for _, ch := range []string{eventsChannel, commandsChannel, doneChannel, rulesChannel, pendingChannel, tokensChannel} {
		if _, err := c.Exec(ctx, `LISTEN `+ch); err != nil {
			return err
		}
	}
	l.wake("") // what was committed before the LISTEN took effect
	for {
		n, err := c.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == commandsChannel && n.Payload == "" {
			l.wakePrefix(commandsChannel + "\x00") // for any daemon
			continue
		}
		l.wake(n.Channel + "\x00" + n.Payload)
		if n.Channel == eventsChannel {
			l.wake(allEventsKey)
		}
	}
}

func (l *listener) stop() {
	l.mu.Lock()
	started, cancel, done := l.started, l.cancel, l.done
	l.mu.Unlock()
	if started {
		cancel()
		<-done
	}
}
