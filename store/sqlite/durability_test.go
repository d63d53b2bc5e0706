package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

const (
	childEnv         = "CLAUDECTL_STORE_TEST_CHILD"    // database path for the child
	childSessionsEnv = "CLAUDECTL_STORE_TEST_SESSIONS" // comma-separated session ids
)

// runChild is the writer killed by TestKillLosesNoAcknowledgedEvent: one
// goroutine per session appends events (alone or in batches) for ever and
// prints "session seq" on stdout for each one Append acknowledged.
func runChild(path string) error {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	ack := func(evs ...*store.Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			fmt.Fprintf(out, "%s %d\n", ev.SessionID, ev.Seq)
		}
		out.Flush() // acknowledged to the "client" only once written out
	}
	errc := make(chan error)
	for w, id := range strings.Split(os.Getenv(childSessionsEnv), ",") {
		go func() {
			k := 0 // events appended by this writer
			for i := 0; ; i++ {
				evs := make([]*store.Event, 1+i%4)
				for j := range evs {
					evs[j] = &store.Event{SessionID: id, Direction: store.FromCLI, Type: "stream_event",
						Raw: line(id, w, k)}
					k++
				}
				if err := db.AppendBatch(ctx, evs...); err != nil {
					errc <- err
					return
				}
				ack(evs...)
			}
		}()
	}
	return <-errc
}

// TestKillLosesNoAcknowledgedEvent runs a writer in a child process,
// SIGKILLs it in the middle of its stream, reopens the database and checks
// that every seq the child acknowledged is there and every log is gap-free.
func TestKillLosesNoAcknowledgedEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "kill.db")
	db, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 6 {
		ids = append(ids, mustSession(t, db).ID)
	}
	db.Close()

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path, childSessionsEnv+"="+strings.Join(ids, ","))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]int64{} // session → highest acknowledged seq
	killAfter := 3000 + rand.IntN(3000)
	count := 0
	sc := bufio.NewScanner(stdout)
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() {
		id, seqText, ok := strings.Cut(sc.Text(), " ")
		seq, err := strconv.ParseInt(seqText, 10, 64)
		if !ok || err != nil {
			t.Fatalf("child wrote %q", sc.Text())
		}
		acked[id] = max(acked[id], seq)
		if count++; count == killAfter || time.Now().After(deadline) {
			cmd.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	// Lines already written by the child before it died are acknowledged
	// too: read them all.
	for sc.Scan() {
		if id, seqText, ok := strings.Cut(sc.Text(), " "); ok {
			if seq, err := strconv.ParseInt(seqText, 10, 64); err == nil {
				acked[id] = max(acked[id], seq)
				count++
			}
		}
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v", err)
	}
	if count < killAfter {
		t.Fatalf("only %d acknowledgements before the kill", count)
	}

	db, err = sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored := 0
	for w, id := range ids {
		evs, err := collect(t, db, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(evs)) < acked[id] {
			t.Errorf("session %d: %d events stored, seq %d was acknowledged", w, len(evs), acked[id])
		}
		for i, ev := range evs {
			if ev.Seq != int64(i+1) || string(ev.Raw) != string(line(id, w, i)) {
				t.Fatalf("session %d: event %d is seq %d %s", w, i, ev.Seq, ev.Raw)
			}
		}
		stored += len(evs)
	}
	t.Logf("killed after %d acknowledgements; %d events stored", count, stored)
}
