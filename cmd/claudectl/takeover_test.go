package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/claudectl/claudectl/api/gen/claudectl/v1"
	"github.com/claudectl/claudectl/apiserver"
	"github.com/claudectl/claudectl/claudetest"
)

// TestWorkerSessionSurvivesOwnerKill: two "claudectl serve" on one
// PostgreSQL, a registered worker given both daemons' addresses, the real
// CLI. A session runs on the worker under daemon A; a client follows it
// through daemon B. A is killed (kill -9) mid-turn: once A's lease has
// expired, B takes the session over as the worker comes back to it, and
// the turn completes through B — the CLI's pid unchanged, the subscriber on
// B seeing every event once, in order, and the stored log holding every
// line the CLI printed, byte for byte, once, with no gap.
func TestWorkerSessionSurvivesOwnerKill(t *testing.T) {
	tmp := t.TempDir()
	tokenFile := filepath.Join(tmp, "worker-token")
	if err := os.WriteFile(tokenFile, []byte("worker-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a turn that outlives its daemon; ", 60)
	ts := startTwoServes(t, func(url string) string {
		return `{"store": {"url": "` + url + `", "lease_ttl": "3s"}, "workers": {"token_file": "` + tokenFile + `"}}`
	}, claudetest.Turn{Blocks: []claudetest.Block{claudetest.Text(long)}, DeltaDelay: 20 * time.Millisecond, ChunkSize: 8})
	ctx, a, b := ts.ctx, ts.a, ts.b

	// The worker runs the real CLI through a wrapper that keeps a copy of
	// everything it prints (exec: the wrapper's pid is the CLI's).
	printed := filepath.Join(tmp, "printed.ndjson")
	wrapper := filepath.Join(tmp, "claude-tee")
	script := "#!/bin/bash\nexec \"" + claudetest.CLIPath(t) + "\" \"$@\" > >(exec tee -a \"" + printed + "\")\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	ws := func(u string) string { return "ws://" + strings.TrimPrefix(u, "http://") + apiserver.WorkerPath }
	worker := exec.Command(ts.binary, "worker", "--name", "w1", "--connect", ws(a.url)+","+ws(b.url),
		"--token-file", tokenFile, "--cli", wrapper, "--grace", "60s", "--verbose")
	worker.Env = ts.env
	var workerLog bytes.Buffer
	worker.Stdout, worker.Stderr = &workerLog, &workerLog
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	workerDone := make(chan struct{})
	go func() { worker.Wait(); close(workerDone) }()
	t.Cleanup(func() {
		worker.Process.Kill()
		<-workerDone
		if t.Failed() {
			t.Logf("worker log:\n%s\nA's log:\n%s\nB's log:\n%s", workerLog.String(), a.log(), b.log())
		}
	})

	var id string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := a.sessions.CreateSession(ctx, connect.NewRequest(&v1.CreateSessionRequest{
			Options: &v1.SessionOptions{Cwd: ts.work, Worker: "w1", IncludePartialMessages: true}}))
		if err == nil {
			id = res.Msg.Session.Id
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CreateSession on worker w1 through A: %v", err)
		}
	}
	clis := childrenOf(worker.Process.Pid)
	if len(clis) != 1 {
		t.Fatalf("the worker runs CLIs %v, want 1", clis)
	}
	stream, err := b.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if _, err := a.sessions.Send(ctx, connect.NewRequest(&v1.SendRequest{SessionId: id, Text: "stream"})); err != nil {
		t.Fatal(err)
	}

	var text strings.Builder
	var last int64
	deltas, result := 0, ""
	var killed, firstAfter time.Time
	for result == "" && stream.Receive() {
		ev := stream.Msg().Event
		if ev.Seq != last+1 {
			t.Fatalf("event seq %d after %d through B: a gap or a repeat", ev.Seq, last)
		}
		last = ev.Seq
		if !killed.IsZero() && firstAfter.IsZero() {
			firstAfter = time.Now()
		}
		if d := ev.GetTextDelta(); d != nil {
			text.WriteString(d.Text)
			if deltas++; deltas == 15 {
				if err := a.cmd.Process.Kill(); err != nil { // kill -9, mid-turn
					t.Fatal(err)
				}
				<-a.done
				killed = time.Now()
			}
		}
		if m := ev.GetMessage(); m.GetType() == "result" && !m.ToCli {
			var r struct{ Result string }
			json.Unmarshal(m.Raw, &r)
			result = r.Result
		}
	}
	if killed.IsZero() {
		t.Fatalf("the turn ended before A could be killed (%d deltas): %v", deltas, stream.Err())
	}
	if result != long || text.String() != long {
		t.Fatalf("through B after A's death: result %q, deltas %q (%v); want the whole text in both", result, text.String(), stream.Err())
	}
	done := time.Now()
	if got := childrenOf(worker.Process.Pid); !slices.Equal(got, clis) {
		t.Errorf("the worker's CLIs %v after the failover, were %v: the CLI was restarted", got, clis)
	}
	var s *connect.Response[v1.GetSessionResponse]
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s, err = b.sessions.GetSession(ctx, connect.NewRequest(&v1.GetSessionRequest{SessionId: id}))
		if err == nil && s.Msg.Session.Status == v1.SessionStatus_SESSION_STATUS_IDLE {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session did not become idle through B: %v %v", s, err)
		}
	}
	last = s.Msg.Session.LastSeq
	if !strings.HasSuffix(s.Msg.Session.Daemon, ts.dataB) || s.Msg.Session.WorkerName != "w1" {
		t.Errorf("session after the failover: daemon %q, worker %q; want B and w1", s.Msg.Session.Daemon, s.Msg.Session.WorkerName)
	}

	// The stored log: every line the CLI printed (but the control traffic
	// the SDK answers), byte for byte, once, in order.
	var stored [][]byte
	replay, err := b.sessions.Subscribe(ctx, connect.NewRequest(&v1.SubscribeRequest{SessionId: id}))
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	for seq < last && replay.Receive() {
		ev := replay.Msg().Event
		if ev.Seq != seq+1 {
			t.Fatalf("stored log: seq %d after %d", ev.Seq, seq)
		}
		seq = ev.Seq
		if m := ev.GetMessage(); m != nil && !m.ToCli {
			stored = append(stored, m.Raw)
		}
		if ev.GetGap() != nil {
			t.Errorf("stored log has a gap record at seq %d: %v", ev.Seq, ev.GetGap())
		}
	}
	replay.Close()
	var want [][]byte
	f, err := os.Open(printed)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		var k struct{ Type string }
		if len(line) == 0 || json.Unmarshal(line, &k) != nil {
			continue
		}
		switch k.Type {
		case "control_request", "control_response", "control_cancel_request", "keep_alive":
			continue
		}
		want = append(want, append([]byte(nil), line...))
	}
	if len(stored) != len(want) {
		t.Errorf("the stored log holds %d of the CLI's lines, the CLI printed %d", len(stored), len(want))
	}
	for i := range min(len(stored), len(want)) {
		if !bytes.Equal(stored[i], want[i]) {
			t.Fatalf("stored line %d differs from what the CLI printed:\nstored:  %.300s\nprinted: %.300s", i, stored[i], want[i])
		}
	}
	t.Logf("kill -9 of A after %d deltas; first event through B %v after the kill; turn complete %v after it (lease 3s); %d CLI lines stored as printed",
		15, firstAfter.Sub(killed).Round(time.Millisecond), done.Sub(killed).Round(time.Millisecond), len(stored))
}

// childrenOf returns the live child processes of pid.
func childrenOf(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces; cut after its ')'.
		rest := string(b[bytes.LastIndexByte(b, ')')+1:])
		var state string
		var ppid int
		if _, err := fmt.Sscan(rest, &state, &ppid); err == nil && ppid == pid && state != "Z" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
