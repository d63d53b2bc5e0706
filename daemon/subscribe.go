package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/claudectl/claudectl/store"
)

// ringBytes bounds the bytes of the lines a hub's ring holds, whatever
// SubscriberBuffer says: a few huge lines must not pin megabytes for every
// watched session. It is also what the garbage collector scans of every
// watched session at each cycle: with 1 MiB, 100 sessions streaming at a
// model's rate grew the heap to 130 MB and each mark phase to 50–120 ms of
// half the CPU, which at a turn's end held lines back for 15–90 ms; with
// 256 KiB the heap stays near 45 MB and a mark takes 10–20 ms. A quarter
// of a MiB is still several seconds of a session's lines at a model's
// rate; a subscriber further behind reads the store.
const ringBytes = 256 << 10

// ringOverhead is what an event costs the ring beside its line.
const ringOverhead = 160

// A hub fans a session's logged events out to its subscribers. It belongs
// to the session, not to a CLI process: the daemon keeps one per session
// id while an actor or a subscriber needs it (Daemon.hubs), so a
// subscription outlives a CLI that ends without ending the session (a
// daemon shutdown, an idle suspension) and goes on with the events of the
// next one.
//
// publish runs on the store's single writer (the commit callback) and
// costs it O(1) whatever the number of subscribers: it appends the event
// to a ring of the session's recent events, bounded in events and bytes,
// and signals the hub's pump without blocking. The pump, a goroutine that
// lives only while the hub has subscribers, wakes them, a crowd of them at
// a bounded rate (see pump): each subscription has a waiter, a channel of
// capacity 1 the pump puts a token in without blocking, and the
// subscriber waits on it alone (a receive, not a select that would lock a
// channel shared by all of them and its context's too). Subscribers pull:
// each takes the events after the last it saw from the ring, and one that
// fell behind the ring reads them from the store instead, then goes on
// from the ring. Nobody is ever dropped, and a slow subscriber never
// blocks its session or the writer. A hub without subscribers keeps
// nothing but the seq of its last event.
type hub struct {
	id       string
	maxCount int // ring bound in events

	signal chan struct{} // capacity 1: events were published, for the pump

	mu    sync.RWMutex
	ring  []Event // guarded by mu: circular, oldest at head; nil without subscribers
	head  int     // guarded by mu
	count int     // guarded by mu
	bytes int     // guarded by mu
	// waiters are the subscriptions' wake-ups, woken after every publish
	// and at the end (each knows its index, for an O(1) leave). They are
	// woken from a copy, outside the lock.
	waiters []*waiter // guarded by mu
	ended   bool      // guarded by mu: the session ended for good (or the daemon closed)
	err     error     // guarded by mu: why it ended, for its subscribers (the store failed)
	// unwoken and unwokenBytes count the events published through the
	// pump since it last woke the subscribers: at half the ring the pump
	// cuts its rest short (see pump and pressing).
	unwoken, unwokenBytes int // guarded by mu

	// guarded by Daemon.mu
	subs     int           // subscriptions following the hub
	actor    bool          // an actor publishes to it
	detached bool          // no longer in Daemon.hubs (ended)
	quit     chan struct{} // closed to stop the pump; nil when it does not run
	unwatch  func()        // ends the broker's watch; nil without subscribers
}

func newHub(id string, maxCount int) *hub {
	return &hub{id: id, maxCount: maxCount, signal: make(chan struct{}, 1)}
}

// A waiter wakes one subscription: a token in c means "look at the ring
// again". Every publish after join puts one there (or finds one there),
// so a subscriber that found nothing new and then waits on c misses
// nothing, and one busy elsewhere meanwhile finds the token when it comes
// back.
type waiter struct {
	c chan struct{}
	i int // index in hub.waiters, guarded by hub.mu
	// done is set before the subscription's context's end wakes it: read
	// right after the wake, it is in memory the wake touched already,
	// unlike the context.
	done atomic.Bool
}

// cancel marks w's subscription ended by its context and wakes it.
func (w *waiter) cancel() {
	w.done.Store(true)
	w.wake()
}

// wake puts a token in w's channel unless one is there already. It never
// blocks.
func (w *waiter) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// join registers a subscription's waiter; leave undoes it.
func (h *hub) join() *waiter {
	w := &waiter{c: make(chan struct{}, 1)}
	h.mu.Lock()
	w.i = len(h.waiters)
	h.waiters = append(h.waiters, w)
	h.mu.Unlock()
	return w
}

func (h *hub) leave(w *waiter) {
	h.mu.Lock()
	last := len(h.waiters) - 1
	moved := h.waiters[last]
	h.waiters[w.i], moved.i = moved, w.i
	h.waiters[last] = nil
	h.waiters = h.waiters[:last]
	h.mu.Unlock()
}

// publish adds evs, in seq order, to the ring and wakes the subscribers
// once for them all (itself or through the pump). It runs on the store's
// writer goroutine and never blocks beyond the ring's lock, which readers
// hold only to copy a few events.
func (h *hub) publish(evs ...Event) {
	h.mu.Lock()
	if h.ended || h.ring == nil { // nobody to tell
		h.mu.Unlock()
		return
	}
	pushed, size := 0, 0
	for _, ev := range evs {
		if h.count > 0 && ev.Seq <= h.at(h.count-1).Seq {
			// Published already: the session's own CLI and the tailer of
			// another daemon's events can both have it. The ring stays in
			// seq order.
			continue
		}
		h.push(ev)
		pushed++
		size += len(ev.Raw) + ringOverhead
	}
	if pushed == 0 {
		h.mu.Unlock()
		return
	}
	if len(h.waiters) <= directWake { // a bounded cost: wake them here, a hop sooner
		var ws [directWake]*waiter
		n := copy(ws[:], h.waiters)
		h.mu.Unlock()
		for _, w := range ws[:n] {
			w.wake()
		}
		return
	}
	h.unwoken += pushed
	h.unwokenBytes += size
	h.mu.Unlock()
	select {
	case h.signal <- struct{}{}:
	default: // the pump has a wake-up pending already
	}
}

// directWake is how many subscribers publish wakes itself, on the
// writer's goroutine, rather than through the pump: a constant, so that
// publishing stays O(1), and the common case (a client or two) saves a
// goroutine hop.
const directWake = 4

// push appends ev to the ring, evicting the oldest events past the bounds
// (the newest always stays). Called with mu held.
func (h *hub) push(ev Event) {
	size := len(ev.Raw) + ringOverhead
	for h.count > 0 && (h.count >= h.maxCount || h.bytes+size > ringBytes) {
		h.bytes -= len(h.ring[h.head].Raw) + ringOverhead
		h.ring[h.head] = Event{}
		h.head = (h.head + 1) % len(h.ring)
		h.count--
	}
	if h.count == len(h.ring) { // full below the bounds: grow
		n := min(max(2*len(h.ring), 16), h.maxCount)
		r := make([]Event, n)
		for i := range h.count {
			r[i] = h.ring[(h.head+i)%len(h.ring)]
		}
		h.ring, h.head = r, 0
	}
	h.ring[(h.head+h.count)%len(h.ring)] = ev
	h.count++
	h.bytes += size
}

// pump wakes the subscribers after each publish until quit is closed, off
// the writer's goroutine.
//
// After waking n subscribers it rests for crowdGap(n) before it wakes
// them again, so that a crowd's wakes cost the CPU a bounded share
// whatever the session's rate: the events published meanwhile wait in the
// ring and each subscriber takes them all at its next wake. 2,000
// subscribers woken for each of a session's lines took about half a CPU
// (a microsecond a wake), and another session's turns were 15 % slower
// beside them on two cores. Up to directWake subscribers are woken at
// once, by publish itself; a crowd waits a few tens of ms at most
// (crowdRest). The rest is cut short when the events waiting reach half
// the ring (pressing): a crowd must not fall behind the ring and read the
// store instead.
func (h *hub) pump(quit chan struct{}) {
	var buf []*waiter // the waiters woken, copied out of the lock; reused
	rest := time.NewTimer(time.Hour)
	rest.Stop()
	var due time.Time // no wake before
	for {
		select {
		case <-h.signal:
		case <-quit:
			return
		}
		if d := time.Until(due); d > 0 && !h.pressing() {
			rest.Reset(d)
		resting:
			for {
				select {
				case <-rest.C:
					break resting
				case <-h.signal:
					if h.pressing() {
						rest.Stop()
						break resting
					}
				case <-quit:
					rest.Stop()
					return
				}
			}
		}
		start := time.Now()
		var n int
		buf, n = h.wakeAll(buf)
		due = start.Add(crowdGap(n))
	}
}

// pressing reports whether the events waiting for the pump's next wake
// fill half the ring, in events or in bytes.
func (h *hub) pressing() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return 2*h.unwoken >= h.maxCount || 2*h.unwokenBytes >= ringBytes
}

// crowdRest.perWake is the rest a hub's pump takes per subscriber it
// woke, and crowdRest.max bounds the rest: 20 µs a subscriber keeps a
// crowd's wakes (a microsecond or two each, the events copied included)
// near a tenth of a CPU; 2,000 subscribers are woken at most once every
// 40 ms, 50 once every 1 ms. A variable for the tests.
var crowdRest = struct{ perWake, max time.Duration }{20 * time.Microsecond, 50 * time.Millisecond}

// crowdGap is the pump's rest after waking n subscribers.
func crowdGap(n int) time.Duration { return min(time.Duration(n)*crowdRest.perWake, crowdRest.max) }

// wakeAll wakes every subscriber, copying the waiters into buf to wake
// them outside the lock (each readies a goroutine); it returns buf for
// the next time, cleared, and how many it woke. It resets the count of
// events waiting for a wake.
//
// It wakes them wakeSlice at a time and yields the processor between
// slices: waking 2,000 at once put 2,000 goroutines in the run queues
// ahead of whatever another session readied next (its reader, the
// writer), which then waited for all of them; now it waits for a slice at
// most.
func (h *hub) wakeAll(buf []*waiter) ([]*waiter, int) {
	h.mu.Lock()
	buf = append(buf[:0], h.waiters...)
	h.unwoken, h.unwokenBytes = 0, 0
	h.mu.Unlock()
	for i, w := range buf {
		if i > 0 && i%wakeSlice == 0 {
			runtime.Gosched()
		}
		w.wake()
	}
	n := len(buf)
	clear(buf) // pin no subscription that leaves
	return buf, n
}

// wakeSlice is how many subscribers wakeAll wakes before it yields.
const wakeSlice = 64

// end marks the hub ended: its subscribers return once they have every
// event published before.
func (h *hub) end() { h.endWith(nil) }

// endWith is end with an error the subscribers get after those events.
func (h *hub) endWith(err error) {
	h.mu.Lock()
	h.ended = true
	if h.err == nil {
		h.err = err
	}
	h.mu.Unlock()
	h.wakeAll(nil)
}

// failure returns the error the hub ended with, if any.
func (h *hub) failure() error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.err
}

// since appends to buf the events of the ring after seq last, at most
// limit of them. behind reports that the ring no longer holds the events
// right after last (the subscriber must read them from the store); ended
// that the hub has ended (with nothing new, the subscription is over).
func (h *hub) since(last int64, buf []Event, limit int) (evs []Event, behind bool, ended bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.count > 0 && h.at(0).Seq > last+1 {
		return buf, true, h.ended
	}
	lo := h.next(last)
	for i := lo; i < h.count && len(buf) < limit; i++ {
		buf = append(buf, *h.at(i))
	}
	return buf, false, h.ended
}

// next returns the index in the ring of the first event after seq last
// (count if there is none). Called with mu held.
//
// The ring is in seq order, and its seqs are those of a session's log,
// consecutive unless an event was never published: the event after last
// is looked for where it would then be before the ring is searched. A
// subscriber that keeps up asks for one of the newest, and a search would
// touch a dozen cache lines across up to a megabyte of ring at each wake
// of each subscriber.
func (h *hub) next(last int64) int {
	if h.count == 0 || h.at(h.count-1).Seq <= last {
		return h.count
	}
	if i := last + 1 - h.at(0).Seq; i >= 0 && i < int64(h.count) && h.at(int(i)).Seq == last+1 {
		return int(i)
	}
	lo, hi := 0, h.count
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if h.at(m).Seq <= last {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// newest returns the seq of the ring's newest event, 0 when it is empty.
func (h *hub) newest() int64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.count == 0 {
		return 0
	}
	return h.at(h.count - 1).Seq
}

// at returns the ring's ith event from the oldest. Called with mu held.
func (h *hub) at(i int) *Event { return &h.ring[(h.head+i)%len(h.ring)] }

// acquireHub returns the hub of session id, made if there is none, counting
// the caller among its users: a subscriber (sub) or the session's actor.
// It returns nil after Close.
func (d *Daemon) acquireHub(id string, sub bool) *hub {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	return d.acquireHubLocked(id, sub)
}

// acquireHubLocked is acquireHub with d.mu held.
func (d *Daemon) acquireHubLocked(id string, sub bool) *hub {
	h := d.hubs[id]
	if h == nil {
		h = newHub(id, d.subBuf)
		d.hubs[id] = h
	}
	if !sub {
		h.actor = true
		return h
	}
	h.subs++
	if h.subs == 1 {
		h.mu.Lock()
		h.ring = []Event{}
		h.mu.Unlock()
		h.quit = make(chan struct{})
		go h.pump(h.quit)
		h.unwatch = d.broker.Watch(id)
	}
	return h
}

// releaseHub undoes acquireHub; the hub is forgotten when neither an actor
// nor a subscriber uses it.
func (d *Daemon) releaseHub(h *hub, sub bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.releaseHubLocked(h, sub)
}

// releaseHubLocked is releaseHub with d.mu held.
func (d *Daemon) releaseHubLocked(h *hub, sub bool) {
	if !sub {
		h.actor = false
	} else {
		h.subs--
		if h.subs == 0 {
			h.mu.Lock()
			h.ring, h.head, h.count, h.bytes = nil, 0, 0, 0
			h.unwoken, h.unwokenBytes = 0, 0
			h.mu.Unlock()
			close(h.quit)
			h.quit = nil
			h.unwatch()
			h.unwatch = nil
		}
	}
	if h.subs == 0 && !h.actor && !h.detached {
		delete(d.hubs, h.id)
		h.detached = true
	}
}

// endHub ends the subscriptions of h's session, which ended for good
// (closed or failed): they return after the events already published. A
// later resume gets a new hub.
func (d *Daemon) endHub(h *hub) {
	d.mu.Lock()
	if !h.detached {
		delete(d.hubs, h.id)
		h.detached = true
	}
	d.mu.Unlock()
	h.end()
}

// failHub ends the subscriptions of h's session with err: the session
// stopped because its events could not be stored (storefail.go). A later
// resume gets a new hub.
func (d *Daemon) failHub(h *hub, err error) {
	d.mu.Lock()
	if !h.detached {
		delete(d.hubs, h.id)
		h.detached = true
	}
	d.mu.Unlock()
	h.endWith(err)
}

// failSubscribers ends the session's subscriptions with err.
func (a *actor) failSubscribers(err error) { a.d.failHub(a.hub, err) }

// endHubs ends every subscription (Close).
func (d *Daemon) endHubs() {
	d.mu.Lock()
	hs := make([]*hub, 0, len(d.hubs))
	for id, h := range d.hubs {
		hs = append(hs, h)
		delete(d.hubs, id)
		h.detached = true
	}
	d.mu.Unlock()
	for _, h := range hs {
		h.end()
	}
}

// terminal reports whether a session in status st has ended for good: its
// subscriptions end rather than wait for a next CLI process.
func terminal(st store.SessionStatus) bool {
	return st == store.StatusClosed || st == store.StatusFailed
}

// subscribeBatch is how many events a subscriber copies from the ring at a
// time.
const subscribeBatch = 256

// Subscribe returns the events of session id after seq after: those
// stored, then the live ones as they are logged, with no gap and no
// duplicate. It follows the session across its CLI processes (a session
// whose CLI ends interrupted or idle goes on with the events of the next
// one) until ctx ends, the daemon closes, or the session ends for good:
// closed or failed, after its last event. For a session stored closed or
// failed without a CLI it ends after the stored events; for one the store
// stopped, while the store cannot record that yet, it ends after them with
// the store's failure (store.ErrWriteFailed). A subscriber that
// falls behind reads the events it missed from the store, so it is never
// dropped and never slows the session. Errors of the replay are the
// store's (store.ErrNotFound, store.ErrUnavailable).
//
// While a subscriber follows a session, the session counts as watched:
// its permission requests expire after the watched timeout.
func (d *Daemon) Subscribe(ctx context.Context, id string, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		// Live first, then replay: whatever is published while the replay
		// runs stays in the ring, and is skipped if the replay had it.
		h := d.acquireHub(id, true)
		// remote: events of the session may come from another daemon
		// sharing the store; they are read from it when it says so.
		var remote <-chan struct{}
		var poll <-chan time.Time
		tailing := false // the daemon's tailer publishes into h
		var w *waiter
		// stopped: the store stopped the session and cannot record it yet:
		// nothing comes until it writes again, and the subscriber is told
		// so after the stored events, as the session's subscribers were.
		var stopped error
		if h != nil {
			defer d.releaseHub(h, true)
			w = h.join()
			defer h.leave(w)
			d.mu.Lock()
			hasActor := h.actor
			d.mu.Unlock()
			if !hasActor {
				if d.stoppedByStore(id) != "" {
					stopped = d.stoppedError(id, nil)
				}
				s, err := d.stored(ctx, id)
				if err != nil {
					yield(Event{}, err)
					return
				}
				if terminal(s.Status) {
					h = nil // nothing more will come: the stored events only
				} else if w, ok := d.db.(store.Watcher); ok {
					if d.tail == nil {
						ch, stop := w.WatchEvents(id)
						defer stop()
						remote = ch
					}
					t := time.NewTicker(followPoll)
					defer t.Stop()
					poll, tailing = t.C, d.tail != nil
				}
			}
		}
		last := after
		if !d.replay(ctx, id, &last, yield) || h == nil {
			return
		}
		if stopped != nil {
			yield(Event{}, stopped)
			return
		}
		if tailing {
			defer d.tail.follow(h, last)()
		}
		// A canceled ctx wakes the subscriber like an event: it then
		// waits on its waiter alone.
		defer context.AfterFunc(ctx, w.cancel)()
		var buf []Event
		for {
			if w.done.Load() { // also between two batches of a firehose
				yield(Event{}, ctx.Err())
				return
			}
			evs, behind, ended := h.since(last, buf[:0], subscribeBatch)
			buf = evs
			if behind {
				if !d.replay(ctx, id, &last, yield) {
					return
				}
				continue
			}
			for i := range evs {
				ev := evs[i]
				evs[i] = Event{} // the ring may drop it: do not pin it here
				if ev.Seq <= last {
					continue
				}
				last = ev.Seq
				if !yield(ev, nil) {
					return
				}
			}
			if len(evs) == subscribeBatch {
				continue // there may be more
			}
			// Every event published before since looked is yielded; a
			// later one puts a token in w (joined before), so waiting on
			// it misses nothing (and a wake costs one look at the ring,
			// not two).
			if ended { // nothing is published after the end: evs were the last
				if err := h.failure(); err != nil {
					yield(Event{}, err)
				}
				return
			}
			if remote == nil && poll == nil { // this daemon's own session: w alone
				<-w.c
				continue
			}
			select {
			case <-w.c:
			case <-remote:
				if !d.follow(ctx, id, &last, false, yield) {
					return
				}
			case <-poll:
				if !d.follow(ctx, id, &last, true, yield) {
					return
				}
			case <-ctx.Done():
				yield(Event{}, ctx.Err())
				return
			}
		}
	}
}

// followPoll is how often a subscriber of a session another daemon runs
// reads the store even without a notification (one can be missed).
const followPoll = 2 * time.Second

// follow yields what another daemon stored of session id after *last. It
// reports false when the subscription is over: yield said stop, an error
// was yielded, or the session ended for good (a status event says closed
// or failed; with check, the stored status too) and every event was
// yielded.
func (d *Daemon) follow(ctx context.Context, id string, last *int64, check bool, yield func(Event, error) bool) bool {
	ended := false
	if check {
		s, err := d.stored(ctx, id)
		if err != nil {
			yield(Event{}, err)
			return false
		}
		// Read before the replay: a terminal status means its events
		// were all in the log the replay reads.
		ended = terminal(s.Status)
	}
	more := d.replay(ctx, id, last, func(ev Event, err error) bool {
		if err == nil && ev.Type == "status" {
			var st StatusChange
			if json.Unmarshal(ev.Raw, &st) == nil && terminal(st.Status) {
				ended = true
			}
		}
		return yield(ev, err)
	})
	return more && !ended
}

// replay yields the stored events of session id after *last, advancing
// *last. It reports false when the subscription is over (yield said stop,
// or an error was yielded).
func (d *Daemon) replay(ctx context.Context, id string, last *int64, yield func(Event, error) bool) bool {
again:
	for ev, err := range d.db.Events(ctx, id, *last) {
		if errors.Is(err, store.ErrNotFound) {
			err = &SessionNotFoundError{ID: id}
		}
		var pe *store.PrunedError
		if errors.As(err, &pe) && pe.Through > *last {
			// Retention removed the events asked for: a gap in their place,
			// at the last removed seq, and the rest of the log after it.
			gap, gerr := newEvent(id, &Gap{Lost: pe.Through - *last,
				Reason: "removed by retention (store.retention.closed_sessions) after the session ended"})
			if gerr != nil {
				yield(Event{}, gerr)
				return false
			}
			gap.Seq = pe.Through
			*last = pe.Through
			if !yield(gap, nil) {
				return false
			}
			goto again
		}
		if err != nil {
			yield(Event{}, err)
			return false
		}
		*last = ev.Seq
		if !yield(EventFromStore(ev), nil) {
			return false
		}
	}
	return true
}
