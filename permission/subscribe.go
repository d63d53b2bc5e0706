package permission

import "sync"

// A Subscription receives the notices of one session, or of all.
type Subscription struct {
	b        *Broker
	session  string
	observer bool // does not count as watching (Observe)
	c        chan Notice
	err      error // guarded by b.mu
	done     bool  // guarded by b.mu
}

// Subscribe starts watching sessionID ("" for every session) and returns
// the subscription with the requests pending at that moment; every later
// change arrives as a Notice on C, in order. While it lasts, the session
// counts as watched for the expiry tiers.
//
// Fan-out never blocks: a subscriber more than SubscriberBuffer notices
// behind is dropped (C is closed and Err returns ErrDropped); it should
// subscribe again, which hands it the pending requests afresh. After the
// broker is closed, Subscribe returns a subscription already closed.
func (b *Broker) Subscribe(sessionID string) (*Subscription, []Pending) {
	return b.subscribe(sessionID, false)
}

// Observe is Subscribe to every session for a program rather than a
// person (the daemon publishing its requests to other daemons): it does
// not count as watching, so the requests keep the unwatched timeout.
func (b *Broker) Observe() (*Subscription, []Pending) { return b.subscribe("", true) }

func (b *Broker) subscribe(sessionID string, observer bool) (*Subscription, []Pending) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &Subscription{b: b, session: sessionID, observer: observer, c: make(chan Notice, b.subBuffer)}
	if b.closed {
		s.done, s.err = true, ErrBrokerClosed
		close(s.c)
		return s, nil
	}
	b.subs[s] = struct{}{}
	if !observer {
		b.watchers[sessionID]++
		b.rearm()
	}
	return s, b.pendingLocked(sessionID)
}

// C returns the channel of notices. It is closed when the subscription
// ends (Close, dropped, broker closed).
func (s *Subscription) C() <-chan Notice { return s.c }

// Err returns why the subscription ended without Close: ErrDropped or
// ErrBrokerClosed; nil while it lasts or after Close.
func (s *Subscription) Err() error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.err
}

// Close ends the subscription and closes C. Idempotent.
func (s *Subscription) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.dropLocked(s, nil)
}

// publish sends n to the subscribers it concerns without blocking,
// dropping those whose buffer is full; b.mu is held.
func (b *Broker) publish(n Notice) {
	for s := range b.subs {
		if s.session != "" && s.session != n.Pending.SessionID {
			continue
		}
		select {
		case s.c <- n:
		default:
			b.dropLocked(s, ErrDropped)
		}
	}
}

// dropLocked ends s with err; b.mu is held.
func (b *Broker) dropLocked(s *Subscription, err error) {
	if s.done {
		return
	}
	s.done, s.err = true, err
	delete(b.subs, s)
	close(s.c)
	if s.observer {
		return
	}
	if b.watchers[s.session]--; b.watchers[s.session] == 0 {
		delete(b.watchers, s.session)
	}
	b.rearm()
}

// Watch counts sessionID ("" for every session) as watched, for the expiry
// tiers, until the returned stop is called (stop is idempotent). It is for
// a client that follows a session's own event stream, where the requests
// already appear, and so needs no notices.
func (b *Broker) Watch(sessionID string) (stop func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return func() {}
	}
	b.watchers[sessionID]++
	b.rearm()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.watchers[sessionID]--; b.watchers[sessionID] <= 0 {
				delete(b.watchers, sessionID)
			}
			b.rearm()
		})
	}
}
