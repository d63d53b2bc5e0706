package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claudectl/claudectl/daemon"
	"github.com/claudectl/claudectl/daemon/daemontest"
	"github.com/claudectl/claudectl/store"
	"github.com/claudectl/claudectl/store/sqlite"
)

// streamTurn is the lines of one turn of the in-process CLI: a system/init,
// deltas stream events, the assistant message and the result.
func streamTurn(deltas int) [][]byte {
	const sid = `"session_id":"$SESSION_ID"`
	ev := func(event string) []byte {
		return fmt.Appendf(nil, `{"type":"stream_event","event":%s,%s,"parent_tool_use_id":null,"uuid":"u"}`, event, sid)
	}
	lines := [][]byte{
		fmt.Appendf(nil, `{"type":"system","subtype":"init",%s,"model":"stand-in","tools":["Bash","Edit","Read","Write"],"cwd":"/","permissionMode":"default","claude_code_version":"2.1.330"}`, sid),
		ev(`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"stand-in","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}`),
		ev(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
	}
	for i := range deltas {
		lines = append(lines, ev(fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word %d "}}`, i)))
	}
	return append(lines,
		fmt.Appendf(nil, `{"type":"assistant","message":{"id":"m","type":"message","role":"assistant","model":"stand-in","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":1,"output_tokens":1}},"parent_tool_use_id":null,%s,"uuid":"a"}`, sid),
		ev(`{"type":"content_block_stop","index":0}`),
		ev(`{"type":"message_stop"}`),
		fmt.Appendf(nil, `{"type":"result","subtype":"success","is_error":false,"result":"ok",%s,"total_cost_usd":0.001,"duration_ms":1,"num_turns":1}`, sid),
	)
}

// TestBackupWhileStreaming: claudectl backup copies the store of a daemon
// whose 20 sessions stream on meanwhile; claudectl restore puts the copy
// in an empty data dir; each session's log there is gap-free from 1 and
// equal, event for event, to the source's up to where the copy was taken
// (the source going on past it); a daemon started on it has them all.
func TestBackupWhileStreaming(t *testing.T) {
	cli := &daemontest.InProcessCLI{Script: func(int) [][]byte { return streamTurn(200) }}
	td := daemontest.Start(t, &daemontest.Options{Transport: cli})
	d, ctx := td.D, td.Ctx
	url, _ := td.Serve()
	inv := invocation{getenv: map[string]string{"CLAUDECTL_TOKEN": td.Token()}}

	const sessions = 20
	ids := make([]string, sessions)
	for i := range ids {
		s, err := d.Create(ctx, &daemon.SessionOptions{Cwd: t.TempDir()}, "stream")
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = s.ID
	}
	// Each session streams turn after turn until stop.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var turnsMu sync.Mutex
	turns := map[string]int{}
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A turn is over when the ledger counts it and the session is
			// idle; then the next prompt goes.
			for done := int64(1); ; done++ {
				for {
					s, err := d.Session(ctx, id)
					if err != nil {
						t.Error(err)
						return
					}
					if s.Status == store.StatusIdle && s.Totals.Turns >= done {
						break
					}
					select {
					case <-ctx.Done():
						t.Errorf("session %s: turn %d did not end (%s)", id, done, s.Status)
						return
					case <-time.After(2 * time.Millisecond):
					}
				}
				turnsMu.Lock()
				turns[id]++
				turnsMu.Unlock()
				select {
				case <-stop:
					return
				default:
				}
				if err := d.Send(ctx, id, "more"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	everyTurned := func(n int) bool {
		turnsMu.Lock()
		defer turnsMu.Unlock()
		for _, id := range ids {
			if turns[id] < n {
				return false
			}
		}
		return true
	}
	for !everyTurned(2) {
		select {
		case <-ctx.Done():
			t.Fatal("the sessions did not stream")
		case <-time.After(10 * time.Millisecond):
		}
	}

	backup := filepath.Join(t.TempDir(), "claudectl-backup.db")
	o := claudectl(t, inv, "backup", "--server", url, backup)
	if o.code != 0 || !strings.Contains(o.stdout, "Backed up the daemon's store to "+backup) {
		t.Fatalf("backup: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
	turnsMu.Lock()
	atBackup := map[string]int{}
	for id, n := range turns {
		atBackup[id] = n
	}
	turnsMu.Unlock()
	for !func() bool { // every session streams on past the copy
		turnsMu.Lock()
		defer turnsMu.Unlock()
		for _, id := range ids {
			if turns[id] < atBackup[id]+2 {
				return false
			}
		}
		return true
	}() {
		select {
		case <-ctx.Done():
			t.Fatal("the sessions stopped streaming after the backup")
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(stop)
	wg.Wait()
	if fi, err := os.Stat(backup); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the backup's mode: %v, %v; want 0600", fi, err)
	}
	if o := claudectl(t, inv, "backup", "--server", url, backup); o.code != 1 || !strings.Contains(o.stderr, "exists") {
		t.Errorf("backup over an existing file: exit %d: %s", o.code, o.stderr)
	}

	dataDir := filepath.Join(t.TempDir(), "restored")
	o = claudectl(t, inv, "restore", backup, "--data-dir", dataDir)
	if o.code != 0 || !strings.Contains(o.stdout, fmt.Sprintf("%d sessions", sessions)) {
		t.Fatalf("restore: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
	if o := claudectl(t, inv, "restore", backup, "--data-dir", dataDir); o.code != 1 || !strings.Contains(o.stderr, "not empty") {
		t.Errorf("restore into a data dir that holds a store: exit %d: %s", o.code, o.stderr)
	}
	restored, err := sqlite.Open(ctx, filepath.Join(dataDir, "claudectl.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	src := td.DB()
	total, wentOn := 0, 0
	for _, id := range ids {
		got, err := collectEvents(restored, id, 0)
		if err != nil {
			t.Fatalf("restored session %s: %v", id, err)
		}
		want, err := collectEvents(src, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 || len(got) > len(want) {
			t.Fatalf("session %s: %d events restored, %d in the source", id, len(got), len(want))
		}
		for i, ev := range got {
			w := want[i]
			if ev.Seq != int64(i+1) || w.Seq != ev.Seq || !bytes.Equal(ev.Raw, w.Raw) || ev.Type != w.Type ||
				ev.Direction != w.Direction || !ev.Time.Equal(w.Time) {
				t.Fatalf("session %s, event %d: restored %d %s %q, source %d %s %q", id, i+1, ev.Seq, ev.Type, ev.Raw, w.Seq, w.Type, w.Raw)
			}
		}
		if s, err := restored.Session(ctx, id); err != nil || s.LastSeq != int64(len(got)) {
			t.Errorf("restored session %s: %+v, %v; want LastSeq %d", id, s, err, len(got))
		}
		total += len(got)
		if len(want) > len(got) {
			wentOn++
		}
	}
	restored.Close()
	if wentOn != sessions {
		t.Errorf("%d of %d sessions streamed past the backup's point; want all (the copy was taken mid-stream)", wentOn, sessions)
	}
	t.Logf("restored %d events of %d sessions", total, sessions)

	// A daemon started on the restored data dir has every session.
	td2 := daemontest.Start(t, &daemontest.Options{Transport: cli, DataDir: dataDir})
	all, err := td2.D.Sessions(td2.Ctx, store.SessionFilter{})
	if err != nil || len(all) != sessions {
		t.Fatalf("the restored daemon lists %d sessions, %v; want %d", len(all), err, sessions)
	}
}
