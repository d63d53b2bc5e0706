//go:build unix

package claude

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/claudectl/claudectl/internal/jsonl"
)

// Shutdown timings of a [ProcessTransport] when its fields are zero; tests
// may shorten them.
var (
	defaultGracePeriod = 5 * time.Second
	defaultKillDelay   = 5 * time.Second
	// stdoutDrainDelay is how long the reader may still read after the CLI
	// exited before its stdout is closed under it (a grandchild may hold it).
	stdoutDrainDelay = 2 * time.Second
)

// ProcessTransport runs the CLI as a child process and talks NDJSON over its
// stdin and stdout. Its zero value is ready to use.
//
// The child runs in its own process group, which receives the termination
// signals; on Linux it is also killed if this process dies. Close ends
// stdin, waits GracePeriod, sends SIGTERM, waits KillDelay, then sends
// SIGKILL; a cancelled context skips the grace period.
//
// The end of the CLI's stdout (EOF, or a read error) is the end of the
// session: a CLI that closes it but keeps running is stopped in the same
// way without waiting for Close (stdin closed, GracePeriod, SIGTERM,
// KillDelay, SIGKILL), and Wait reports an *ExitError whose KeptRunning
// says so. A CLI that exits meanwhile, as the CLI does after its last
// line, is reported as ever, with no delay.
//
// # No orphans
//
// When the CLI ends, for any reason (Close, a cancelled context, a crash, a
// kill from outside), every process it started is killed with SIGKILL before
// Wait and Close return, unless KeepDetached is set. This includes tools
// that left its process group (the CLI starts each tool in its own session)
// and double-forked daemons. On Linux the first of these that works is used:
//
//   - a cgroup v2 child of this process's own cgroup, which the CLI is born in
//     and which cgroup.kill empties: nothing escapes it, whatever it does
//     (needs write access to our cgroup, as root or in a delegated systemd
//     subtree such as a user service, no controllers enabled in that cgroup's
//     subtree_control, and Linux 5.14);
//   - a cgroup v1 "pids" (or "freezer") child of our own cgroup, writable as
//     root; the CLI is moved in just after it starts;
//   - the variable CLAUDECTL_PROCESS_TREE=<random>, set in the CLI's
//     environment and so inherited by what it starts: /proc is scanned for
//     processes of our user carrying it and for their descendants. A process
//     that both clears its environment and leaves the tree (env -i plus a
//     double fork) escapes this one.
//
// The variable is set in every case and the scan also backs up a v1 cgroup.
// Cgroups are named claudectl-<pid>-<start time>-<random>; those left by a
// host process that was itself killed are emptied and removed by the next
// Start in the same cgroup. Other unix systems have only the process group:
// a tool that calls setsid survives the CLI there.
//
// # Resource limits
//
// Limits are applied to the cgroup that holds the tree, so they bind the
// CLI and its tools together, detached ones included (Linux only; elsewhere
// Start refuses them). Where the controllers (memory, cpu, pids) are in
// the cgroup v2 hierarchy, the tree's cgroup v2 holds them from the CLI's
// birth; our own cgroup must hand them down, which it can when this
// process runs alone in it (a systemd service with Delegate=yes): the
// first Start with limits then moves this process into a leaf of its
// cgroup, claudectl-supervisor, and enables the controllers for the
// trees beside it. Where they are in cgroup v1 hierarchies (hybrid and
// legacy hosts) the CLI joins a child of our own cgroup in each, with its
// limit, just after it starts. Otherwise Start fails, saying why.
//
// The killed processes are reaped by their new parent, init or the nearest
// child subreaper. When this process is that reaper (pid 1 in a container,
// or PR_SET_CHILD_SUBREAPER), it reaps them itself, and only them: never
// another child, whose exit status belongs to os/exec.
type ProcessTransport struct {
	// GracePeriod is how long Close waits for the CLI to exit on its own
	// after its stdin is closed. Zero means 5s; a negative value means no
	// grace period (SIGTERM at once). It is also how long a CLI that
	// closed its stdout may go on running; there, zero or negative means
	// 5s, since a CLI closes its stdout just before it exits.
	GracePeriod time.Duration
	// KillDelay is how long to wait after SIGTERM before SIGKILL. Zero
	// means 5s.
	KillDelay time.Duration
	// Stderr, if set, receives each line the CLI writes on stderr. It is
	// called from one goroutine and must not block for long: the CLI
	// blocks writing to stderr meanwhile. A panic in it is logged and
	// disables it. It may close the session; Close then waits up to two
	// seconds for it to return.
	Stderr func(line string)
	// ReadBufferSize is the size of the stdout read buffer, allocated on
	// the first read and kept for the session's life. Zero means 384 KiB,
	// which suits a fast stream; a host of many mostly idle sessions may
	// prefer less, at some cost in peak throughput.
	ReadBufferSize int
	// KeepDetached, if true, kills only the CLI's process group when it
	// ends: processes that left the group (their own session, a double
	// fork) outlive the CLI, as with a plain exec.Cmd. The zero value kills
	// them all (see "No orphans" above).
	KeepDetached bool
	// Scheduling is how the kernel schedules the CLI and everything it
	// starts; "" is SchedulingNormal. A program that supervises many CLIs
	// stays responsive with SchedulingBatch.
	Scheduling Scheduling
	// Limits caps the memory, CPU and processes of the CLI and everything
	// it starts, together (see "Resource limits" above); the zero value
	// caps nothing. Start fails with a *LimitsError (in a *StartError)
	// when they cannot be applied. A CLI killed by its memory limit ends
	// with an *ExitError whose MemoryLimit is set.
	Limits ResourceLimits

	// stdoutNotProtocol is set by WebSocketTransport, whose CLI speaks
	// over the WebSocket: the end of its stdout is not the session's.
	stdoutNotProtocol bool
}

// A Scheduling is a CPU scheduling policy for the CLI's processes.
type Scheduling string

const (
	// SchedulingNormal schedules the CLI as any other process.
	SchedulingNormal Scheduling = "normal"
	// SchedulingBatch starts the CLI under Linux's SCHED_BATCH policy,
	// which its threads and every process it starts (tools, their
	// children) inherit: the same share of the CPU as before, but their
	// waking no longer preempts a process that is running, such as the
	// program supervising them; a CLI that wakes waits at most for the
	// running process's time slice (a few milliseconds when the CPUs are
	// busy, nothing when one is idle). With a hundred CLIs streaming on
	// two cores, a daemon relaying their lines saw its p99 line latency
	// fall by about a quarter. It applies only when this process runs
	// under the default policy (SCHED_OTHER) and is ignored on other
	// systems.
	SchedulingBatch Scheduling = "batch"
)

// ParseScheduling returns the Scheduling s names ("batch" or "normal");
// anything else, "" included, is an error.
func ParseScheduling(s string) (Scheduling, error) {
	if s == "" {
		return "", fmt.Errorf("no scheduling given: use %q or %q", SchedulingBatch, SchedulingNormal)
	}
	sc := Scheduling(s)
	return sc, sc.Validate()
}

// Validate reports an error for a Scheduling that is none of the above
// ("" is fine: SchedulingNormal).
func (s Scheduling) Validate() error {
	if s != "" && s != SchedulingNormal && s != SchedulingBatch {
		return fmt.Errorf("unknown scheduling %q: use %q or %q", s, SchedulingBatch, SchedulingNormal)
	}
	return nil
}

func (t *ProcessTransport) readBufferSize() int {
	if t.ReadBufferSize > 0 {
		return t.ReadBufferSize
	}
	return 384 << 10
}

// stderrTailBytes is how much of stderr is kept for errors.
const stderrTailBytes = 4096

// tail keeps the last stderrTailBytes of a text.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, s...)
	t.b = append(t.b, '\n')
	if len(t.b) > stderrTailBytes {
		t.b = append(t.b[:0], t.b[len(t.b)-stderrTailBytes:]...)
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// Start implements [Transport].
func (t *ProcessTransport) Start(ctx context.Context, c *Command) (Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := t.Scheduling.Validate(); err != nil {
		return nil, &StartError{Path: c.Path, Err: err}
	}
	if c.Dir != "" {
		if fi, err := os.Stat(c.Dir); err != nil || !fi.IsDir() {
			return nil, &StartError{Path: c.Path, Err: fmt.Errorf("working directory %q does not exist or is not a directory", c.Dir)}
		}
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, &StartError{Path: c.Path, Err: err}
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, &StartError{Path: c.Path, Err: err}
	}
	growPipe(stdoutW) // fewer wake-ups when the CLI writes fast
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		for _, f := range []*os.File{stdinR, stdinW, stdoutR, stdoutW} {
			f.Close()
		}
		return nil, &StartError{Path: c.Path, Err: err}
	}
	tree, err := newProcTree(t.KeepDetached, t.Limits)
	if err != nil {
		for _, f := range []*os.File{stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW} {
			f.Close()
		}
		return nil, &StartError{Path: c.Path, Err: err}
	}
	newCmd := func() *exec.Cmd {
		cmd := exec.Command(c.Path, c.Args...)
		cmd.Env = tree.environ(c.Env)
		cmd.Dir = c.Dir
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
		cmd.SysProcAttr = procAttr()
		tree.apply(cmd.SysProcAttr)
		return cmd
	}
	cmd := newCmd()
	err = startCmd(cmd, t.Scheduling, tree)
	if err != nil && tree.startFailed() {
		// The cgroup refused the child (controllers, permissions): without.
		cmd = newCmd()
		err = startCmd(cmd, t.Scheduling, tree)
	}
	if err == nil {
		if err = tree.started(cmd.Process.Pid); err != nil {
			// Not held by its limits: it must not run.
			cmd.Process.Kill()
			cmd.Wait()
			tree.kill()
		}
	} else {
		tree.abandon()
	}
	// The child has its own copies now.
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		stderrR.Close()
		return nil, &StartError{Path: c.Path, Err: err}
	}
	p := &process{
		ctx:          ctx,
		grace:        t.GracePeriod,
		defaultGrace: defaultGracePeriod,
		killDelay:    cmp.Or(t.KillDelay, defaultKillDelay),
		drainDelay:   stdoutDrainDelay,
		t:            t,
		cmd:          cmd,
		tree:         tree,
		stdin:        stdinW,
		stdout:       stdoutR,
		stderr:       stderrR,
		reader:       jsonl.NewReader(stdoutR, &jsonl.ReaderOptions{MaxLineBytes: c.MaxLineBytes, BufferSize: t.readBufferSize()}),
		exited:       make(chan struct{}),
		outEnd:       make(chan struct{}),
		stopOnOutEnd: !t.stdoutNotProtocol,
		stderrD:      make(chan struct{}),
		stop:         make(chan struct{}),
		wturn:        make(chan struct{}, 1),
	}
	go p.drainStderr()
	go p.wait()
	go p.watch(ctx)
	return p, nil
}

type process struct {
	ctx                   context.Context // the session's life; when done, no grace period
	grace, defaultGrace   time.Duration
	killDelay, drainDelay time.Duration
	t                     *ProcessTransport
	cmd                   *exec.Cmd
	tree                  *procTree // owned by wait
	stdin                 *os.File
	stdout                *os.File
	stderr                *os.File
	reader                *jsonl.Reader

	exited  chan struct{} // closed when the child has been reaped
	exitErr error         // set before exited is closed
	stderrD chan struct{} // closed when stderr is drained
	stop    chan struct{} // closed when the teardown begins (closeOnce): ends watch

	// outEnd is closed when ReadLine first fails (EOF, a read error):
	// watch then stops a CLI that keeps running, if stopOnOutEnd.
	outEnd       chan struct{}
	outEndOnce   sync.Once
	stopOnOutEnd bool
	// keptRunning is set, before each signal, when the CLI is stopped
	// because it kept running after its output ended: the time waited
	// (see ExitError.KeptRunning). Read by wait once the child is reaped.
	keptRunning atomic.Int64

	// wturn holds a token while a line is being written to stdin.
	wturn chan struct{}
	// stdinMu guards eofAsked (CloseWrite was called) and stdinClosed.
	stdinMu     sync.Mutex
	eofAsked    bool
	stdinClosed bool

	closeOnce sync.Once
	stdoutMu  sync.Once

	stderrOff bool // the Stderr callback panicked; owned by drainStderr

	tailMu sync.Mutex
	tail   []byte
}

func (p *process) ReadLine() (Line, error) {
	l, err := p.reader.Next()
	if err != nil {
		p.outEndOnce.Do(func() { close(p.outEnd) })
		if errors.Is(err, os.ErrClosed) {
			err = io.EOF
		}
		return Line{}, err
	}
	ln := Line{Data: l.Data}
	if l.Truncated {
		ln.OriginalSize = l.OriginalSize
	}
	return ln, nil
}

// Buffered reports how many bytes of output are buffered but not yet returned.
func (p *process) Buffered() int { return p.reader.Buffered() }

// WriteLine writes line to the CLI's stdin. Writers take turns through
// p.wturn, so lines are never interleaved; a caller whose ctx ends while it
// waits for its turn returns at once and its line is not written. A write
// in progress is cut by ctx through a write deadline (stdin is a pipe in
// Go's poller): if nothing of the line was written yet, the line is
// withdrawn; if part of it was, the rest is written in the background by a
// goroutine that keeps the turn until it is done, so that the next line is
// never glued to half of this one. Closing stdin (CloseWrite, Close, the
// CLI's exit) ends that goroutine.
func (p *process) WriteLine(ctx context.Context, line []byte) error {
	if err := ctx.Err(); err != nil {
		return notWritten(err)
	}
	select {
	case p.wturn <- struct{}{}:
	case <-ctx.Done():
		return notWritten(ctx.Err())
	}
	if p.inputClosed() {
		p.releaseTurn()
		return p.inputClosedErr()
	}
	n, err := p.writeCtx(ctx, line)
	if err == nil {
		p.releaseTurn()
		return nil
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
		if n == 0 {
			p.releaseTurn()
			return notWritten(ctx.Err())
		}
		rest := append([]byte(nil), line[n:]...)
		go p.finishLine(rest) // releases the turn
		return &partialWriteError{err: ctx.Err(), written: n, size: len(line)}
	}
	p.releaseTurn()
	if p.inputClosed() {
		return p.inputClosedErr()
	}
	select {
	case <-p.exited:
		return p.exitOrClosed()
	case <-time.After(100 * time.Millisecond):
	}
	return fmt.Errorf("stdin: %w", err)
}

// writeCtx writes line, cut short with os.ErrDeadlineExceeded when ctx
// ends. The caller holds the turn.
func (p *process) writeCtx(ctx context.Context, line []byte) (int, error) {
	var mu sync.Mutex
	armed := true
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if armed {
			_ = p.stdin.SetWriteDeadline(time.Unix(1, 0)) // wakes a blocked Write
		}
	})
	n, err := p.stdin.Write(line)
	if !stop() {
		// The deadline was set, or is being set: disarm, then clear it.
		mu.Lock()
		armed = false
		mu.Unlock()
		_ = p.stdin.SetWriteDeadline(time.Time{})
	}
	return n, err
}

// finishLine writes the rest of a line whose writer gave up, then releases
// the turn. It ends when the line is written or stdin is closed.
func (p *process) finishLine(rest []byte) {
	defer p.releaseTurn()
	if _, err := p.stdin.Write(rest); err != nil && !p.inputClosed() {
		// The CLI closed its stdin: nothing more can be written.
		p.closeStdin()
	}
}

// releaseTurn gives up the turn to write; if CloseWrite was called
// meanwhile, stdin is closed first.
func (p *process) releaseTurn() {
	p.stdinMu.Lock()
	if p.eofAsked {
		p.closeStdinLocked()
	}
	p.stdinMu.Unlock()
	<-p.wturn
}

func (p *process) inputClosed() bool {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	return p.eofAsked || p.stdinClosed
}

// inputClosedErr is the error of a write after the input ended.
func (p *process) inputClosedErr() error {
	select {
	case <-p.exited:
		return p.exitOrClosed()
	default:
	}
	return errInputClosed
}

// errInputClosed is a write's error after CloseWrite or Close.
var errInputClosed = fmt.Errorf("%w: the CLI's input is closed", ErrClosed)

// notWritten is a write's error when ctx ended before any of the line
// was written: the line will not be.
func notWritten(err error) error {
	return fmt.Errorf("line not written: %w", err)
}

// A partialWriteError is a write's error when ctx ended after part of the
// line had been written: the rest is written in the background, so the
// line reaches the CLI whole when it reads again, unless its input is
// closed first.
type partialWriteError struct {
	err           error
	written, size int
}

func (e *partialWriteError) Error() string {
	return fmt.Sprintf("%v after %d of the line's %d bytes were written; the rest will be written when the CLI reads its input again, unless the input is closed first", e.err, e.written, e.size)
}

func (e *partialWriteError) Unwrap() error { return e.err }

func (p *process) exitOrClosed() error {
	if p.exitErr != nil {
		return p.exitErr
	}
	return ErrClosed
}

// CloseWrite ends the CLI's input without waiting for a writer: if a line
// is being written, stdin is closed once it is done (or by Close).
func (p *process) CloseWrite() error {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	p.eofAsked = true
	select {
	case p.wturn <- struct{}{}: // nobody is writing
		p.closeStdinLocked()
		<-p.wturn
	default: // releaseTurn closes it
	}
	return nil
}

// closeStdin closes stdin now; a Write in progress fails at once.
func (p *process) closeStdin() {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	p.closeStdinLocked()
}

func (p *process) closeStdinLocked() {
	if !p.stdinClosed {
		p.stdinClosed = true
		p.stdin.Close()
	}
}

func (p *process) Wait() error {
	<-p.exited
	return p.exitErr
}

func (p *process) StderrTail() string {
	p.tailMu.Lock()
	defer p.tailMu.Unlock()
	return string(p.tail)
}

// Close implements [Conn].
func (p *process) Close() error {
	p.closeOnce.Do(func() {
		close(p.stop)
		p.closeStdin() // never waits for a writer: its Write fails
		if p.ctx.Err() != nil {
			p.terminate(-1, nil) // cancelled: SIGTERM now
		} else {
			p.terminate(p.grace, nil)
		}
	})
	<-p.exited
	select {
	case <-p.stderrD:
	case <-time.After(time.Second): // something outside the group holds stderr, or Stderr is slow
		p.stderr.Close()
		select {
		case <-p.stderrD:
		case <-time.After(time.Second):
			// The Stderr callback has not returned (it may be the one
			// calling Close): leave it.
		}
	}
	p.closeStdout()
	return p.exitErr
}

// terminate waits up to grace (zero: the default, negative: none) for the
// child to exit, then escalates; the session's ctx ending cuts the grace
// period short. signalled, if not nil, is called before each signal with
// the time waited so far.
func (p *process) terminate(grace time.Duration, signalled func(waited time.Duration)) {
	if grace == 0 {
		grace = p.defaultGrace
	}
	var waited time.Duration
	if grace > 0 {
		start := time.Now()
		t := time.NewTimer(grace)
		select {
		case <-p.exited:
			t.Stop()
			p.killGroup()
			return
		case <-t.C:
			waited = grace
		case <-p.ctx.Done():
			t.Stop()
			waited = time.Since(start)
		}
	}
	if signalled != nil {
		signalled(waited)
	}
	p.signalGroup(syscall.SIGTERM)
	kd := p.killDelay
	t := time.NewTimer(kd)
	select {
	case <-p.exited:
		t.Stop()
	case <-t.C:
		if signalled != nil {
			signalled(waited + kd)
		}
		p.signalGroup(syscall.SIGKILL)
		<-p.exited
	}
	p.killGroup()
}

// stopAfterOutput ends a CLI whose output has ended, as Close does: its
// input is closed, it is given the grace period to exit (as the CLI does
// right after its last line), then it is signalled. A non-positive
// GracePeriod means the default here: no CLI exits before its output ends.
func (p *process) stopAfterOutput() {
	p.closeStdin()
	grace := p.grace
	if grace <= 0 {
		grace = p.defaultGrace
	}
	p.terminate(grace, func(waited time.Duration) {
		p.keptRunning.Store(int64(max(waited, time.Nanosecond)))
	})
}

// killGroup removes whatever the CLI left behind in its process group.
func (p *process) killGroup() { p.signalGroup(syscall.SIGKILL) }

func (p *process) signalGroup(sig syscall.Signal) {
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(-pid, sig); err != nil {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Signal(sig)
		}
	}
}

// watch tears the child down when the context ends, or when its output
// has ended but it keeps running.
func (p *process) watch(ctx context.Context) {
	outEnd := p.outEnd
	if !p.stopOnOutEnd {
		outEnd = nil // never ready
	}
	select {
	case <-ctx.Done():
		p.closeOnce.Do(func() {
			close(p.stop)
			p.closeStdin()
			p.terminate(-1, nil) // no grace: SIGTERM now
		})
		p.closeStdout()
	case <-outEnd:
		p.closeOnce.Do(func() {
			close(p.stop)
			p.stopAfterOutput()
		})
		p.closeStdout() // its reader is done
	case <-p.stop:
	case <-p.exited:
	}
}

// wait reaps the child and records how it ended.
func (p *process) wait() {
	err := p.cmd.Wait()
	// Read at once: a signal sent after this found the CLI already gone.
	kept := time.Duration(p.keptRunning.Load())
	// Whatever the CLI started goes with it, however it ended.
	p.killGroup()
	p.tree.kill()
	// Give the stderr drain a moment so the tail is complete.
	select {
	case <-p.stderrD:
	case <-time.After(500 * time.Millisecond):
	}
	p.exitErr = p.exitError(err, kept)
	close(p.exited)
	// Nobody reads stdin any more (a leftover holding it open included):
	// a write waiting on it fails now.
	p.closeStdin()
	// If something else still holds stdout open, stop reading after a while.
	go func() {
		select {
		case <-time.After(p.drainDelay):
			p.closeStdout()
		case <-p.stop:
		}
	}()
}

// MemoryKills implements memoryKiller.
func (p *process) MemoryKills() int64 { return p.tree.memoryKills() }

func (p *process) closeStdout() {
	p.stdoutMu.Do(func() { p.stdout.Close() })
}

// exitError turns cmd.Wait's error into an *ExitError; keptRunning is
// non-zero when the CLI was stopped because it outlived its output.
func (p *process) exitError(err error, keptRunning time.Duration) error {
	if err == nil && keptRunning == 0 {
		return nil
	}
	ee := &ExitError{Code: -1, Stderr: p.StderrTail(), KeptRunning: keptRunning}
	if err == nil { // it caught our SIGTERM and exited 0
		ee.Code = 0
		return ee
	}
	var xe *exec.ExitError
	if errors.As(err, &xe) {
		if ws, ok := xe.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ee.Signal = ws.Signal().String()
			if limit, ok := p.tree.killedByMemory(); ok && ws.Signal() == syscall.SIGKILL {
				ee.MemoryLimit = limit
			}
		} else {
			ee.Code = xe.ExitCode()
		}
		return ee
	}
	ee.Stderr = strings.TrimSpace(ee.Stderr + "\n" + err.Error())
	return ee
}

// stderrLine passes a line to the Stderr callback, unless it panicked
// before: a panic is logged and turns the callback off.
func (p *process) stderrLine(line string) {
	if p.stderrOff {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			p.stderrOff = true
			slog.Error("claude: the Stderr callback panicked; it is called no more", "pid", p.cmd.Process.Pid, "panic", r)
		}
	}()
	p.t.Stderr(line)
}

func (p *process) drainStderr() {
	defer close(p.stderrD)
	defer p.stderr.Close()
	buf := make([]byte, 32<<10)
	var partial []byte
	for {
		n, err := p.stderr.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			p.tailMu.Lock()
			p.tail = append(p.tail, chunk...)
			if len(p.tail) > stderrTailBytes {
				p.tail = append(p.tail[:0], p.tail[len(p.tail)-stderrTailBytes:]...)
			}
			p.tailMu.Unlock()
			if p.t.Stderr != nil {
				partial = append(partial, chunk...)
				for {
					i := strings.IndexByte(string(partial), '\n')
					if i < 0 {
						break
					}
					p.stderrLine(strings.TrimRight(string(partial[:i]), "\r"))
					partial = partial[i+1:]
				}
				if len(partial) > 64<<10 { // a very long line: flush it in parts
					p.stderrLine(string(partial))
					partial = partial[:0]
				}
			}
		}
		if err != nil {
			if len(partial) > 0 && p.t.Stderr != nil {
				p.stderrLine(string(partial))
			}
			return
		}
	}
}
