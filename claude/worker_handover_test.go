package claude

import "testing"

// TestHandOverNamesTheWorker: the link sends the start's result and then
// closes gone at once, so handOver may see both ready; the session must
// still be told which worker runs it (make test: the session runs on "",
// want honest-1).
func TestHandOverNamesTheWorker(t *testing.T) {
	l := &WorkerListener{}
	for i := range 2000 {
		wl := &workerLink{l: l, name: "honest-1", assign: make(chan assignment, 1), gone: make(chan struct{})}
		go func() {
			a := <-wl.assign
			a.result <- nil
			close(wl.gone)
		}()
		rc := &workerConn{}
		if err := l.handOver(wl, rc); err != nil {
			t.Fatal(err)
		}
		<-wl.gone
		if rc.worker != "honest-1" {
			t.Fatalf("round %d: the session runs on %q, want honest-1", i, rc.worker)
		}
	}
}
