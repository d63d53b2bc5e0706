package permission

import "time"

// SetTimeouts changes BrokerOptions.WatchedTimeout and UnwatchedTimeout
// while the broker runs (a reload of the settings); zero keeps one as it
// is. A request's clock starts again in the new tier whenever its session
// changes between watched and unwatched; the requests waiting now keep
// the timer they have until then, and new ones get the new timeouts.
func (b *Broker) SetTimeouts(watched, unwatched time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if watched > 0 {
		b.watched = watched
	}
	if unwatched > 0 {
		b.unwatched = unwatched
	}
}
