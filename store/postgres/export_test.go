package postgres

// HoldLiveness keeps db from taking its liveness lock again, once it lost
// it, until the returned function is called.
func HoldLiveness(db *DB) (release func()) {
	gate := make(chan struct{})
	db.liveLock.mu.Lock()
	db.liveLock.gate = gate
	db.liveLock.mu.Unlock()
	return func() { close(gate) }
}
