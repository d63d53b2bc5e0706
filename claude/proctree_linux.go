package claude

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A process tree is everything one CLI started. On Linux it is held, most
// robust first, by
//
//   - a cgroup v2 sub-cgroup of this process's own cgroup, which the CLI is
//     born in (clone3 CLONE_INTO_CGROUP) and which cgroup.kill empties;
//   - a cgroup v1 "pids" (or "freezer") sub-cgroup the CLI is moved into right
//     after it starts;
//   - the marker variable in the CLI's environment, which every process it
//     starts inherits: at the end /proc is scanned for processes carrying it
//     and for their descendants.
//
// The marker is set in every case, so the scan backs up the v1 cgroups (a
// process forked before the CLI joined the cgroup is still found).

// envProcessTree names the marker variable.
const envProcessTree = "CLAUDECTL_PROCESS_TREE"

// cgroupPrefix starts the name of every cgroup we make:
// claudectl-<pid>-<start time>-<random>, so that a later process can tell the
// cgroups of a host that died from those of one still running.
const cgroupPrefix = "claudectl-"

// Mechanisms, in the order they are tried.
const (
	mechCgroup2       = "cgroup2"
	mechCgroup1Pids   = "cgroup1-pids"
	mechCgroup1Freeze = "cgroup1-freezer"
	mechEnviron       = "environ"
	mechGroup         = "process-group"
)

// forceTreeMech, when set (by tests), is the only mechanism tried.
var forceTreeMech string

// procTree tracks the processes of one CLI. Its methods are called from one
// goroutine at a time: all but kill from Start, kill from the goroutine that
// reaped the CLI.
type procTree struct {
	mech   string
	marker string
	dir    string   // the cgroup, for the cgroup mechanisms
	cgfd   *os.File // the cgroup v2 directory, while the CLI is started
	killed bool
	lim    *cgroupLimits // the resource limits, nil for none
}

// newProcTree prepares the tracking of a CLI about to start; keepDetached
// limits it to the process group. With limits it fails with a
// *LimitsError when they cannot be applied (limits_linux.go).
func newProcTree(keepDetached bool, limits ResourceLimits) (*procTree, error) {
	if !limits.IsZero() {
		return newLimitedTree(keepDetached, limits)
	}
	if keepDetached || forceTreeMech == mechGroup {
		return &procTree{mech: mechGroup}, nil
	}
	t := &procTree{mech: mechEnviron, marker: randomHex(16)}
	t.track()
	return t, nil
}

// track picks how t holds the tree, the first mechanism that works.
func (t *procTree) track() {
	try := func(m string) bool { return forceTreeMech == "" || forceTreeMech == m }
	if try(mechCgroup2) {
		if dir, f, err := makeCgroup2(); err == nil {
			t.mech, t.dir, t.cgfd = mechCgroup2, dir, f
			return
		}
	}
	for _, m := range []string{mechCgroup1Pids, mechCgroup1Freeze} {
		if !try(m) {
			continue
		}
		controller := strings.TrimPrefix(m, "cgroup1-")
		if dir := t.lim.v1dir(controller); dir != "" {
			// The CLI can be in one cgroup of a hierarchy: the one with
			// its limit holds it.
			t.mech, t.dir = m, dir
			t.lim.untrack(controller)
			return
		}
		if dir, err := makeCgroup1(controller); err == nil {
			t.mech, t.dir = m, dir
			return
		}
	}
}

// newLimitedTree is newProcTree with limits: the tree's cgroup v2 holds
// them, or cgroup v1 ones the CLI joins (limits_linux.go).
func newLimitedTree(keepDetached bool, limits ResourceLimits) (*procTree, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	if keepDetached {
		return nil, &LimitsError{Limits: limits, Reason: "they hold the CLI's whole process tree, which KeepDetached lets go"}
	}
	lim, v2parent, err := newCgroupLimits(limits)
	if err != nil {
		return nil, err
	}
	t := &procTree{mech: mechEnviron, marker: randomHex(16), lim: lim}
	if v2parent == "" {
		t.track()
		return t, nil
	}
	cleanLeftovers(v2parent, true)
	dir, f, err := makeCgroup2In(v2parent)
	if err == nil {
		if err = lim.writeV2(dir); err != nil {
			f.Close()
			os.Remove(dir)
		}
	}
	if err != nil {
		return nil, &LimitsError{Limits: limits, Reason: err.Error()}
	}
	t.mech, t.dir, t.cgfd = mechCgroup2, dir, f
	return t, nil
}

// environ returns env with the marker set (replacing any inherited one).
func (t *procTree) environ(env []string) []string {
	if t.marker == "" {
		return env
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, envProcessTree+"=") {
			out = append(out, kv)
		}
	}
	return append(out, envProcessTree+"="+t.marker)
}

// apply sets what the child needs at birth.
func (t *procTree) apply(a *syscall.SysProcAttr) {
	if t.cgfd != nil {
		a.UseCgroupFD = true
		a.CgroupFD = int(t.cgfd.Fd())
	}
}

// startFailed is called when a start with apply's attributes failed: the
// cgroup v2 placement is dropped (the marker stays) so that a retry without
// it can succeed. It reports whether a retry is worth it.
func (t *procTree) startFailed() bool {
	if t.mech != mechCgroup2 || t.lim != nil { // without its cgroup, no limits
		return false
	}
	t.closeFD()
	os.Remove(t.dir)
	t.mech, t.dir = mechEnviron, ""
	return true
}

// started is called once the CLI runs as pid. An error (its limits could
// not be joined) means the CLI must be stopped: kill then cleans up.
func (t *procTree) started(pid int) error {
	t.closeFD()
	switch t.mech {
	case mechCgroup1Pids, mechCgroup1Freeze:
		if err := os.WriteFile(filepath.Join(t.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			if t.lim != nil && t.mech == mechCgroup1Pids && t.lim.limits.PIDsMax > 0 {
				return &LimitsError{Limits: t.lim.limits, Reason: "the CLI could not join its pids cgroup: " + err.Error()}
			}
			os.Remove(t.dir)
			t.mech, t.dir = mechEnviron, ""
		}
	}
	if t.lim != nil {
		return t.lim.join(pid)
	}
	return nil
}

// abandon undoes newProcTree when the CLI did not start.
func (t *procTree) abandon() {
	t.closeFD()
	if t.dir != "" {
		os.Remove(t.dir)
	}
	if t.lim != nil {
		t.lim.remove()
	}
}

// memoryKills returns how many processes of the tree its memory limit has
// killed so far; 0 without one. Safe to call from any goroutine.
func (t *procTree) memoryKills() int64 {
	if t.lim == nil {
		return 0
	}
	return max(t.lim.memoryKills(), 0)
}

// killedByMemory reports, once the tree is dead, whether its memory limit
// killed a process since memoryKills last looked, and the limit.
func (t *procTree) killedByMemory() (int64, bool) {
	if t.lim == nil || !t.lim.killedByMemory() {
		return 0, false
	}
	return t.lim.limits.MemoryMax, true
}

func (t *procTree) closeFD() {
	if t.cgfd != nil {
		t.cgfd.Close()
		t.cgfd = nil
	}
}

// kill ends every process of the tree; the CLI itself has been reaped. It
// returns once they are dead (or after a bound) and, if this process is
// their reaper (pid 1 or a child subreaper), once they are reaped.
func (t *procTree) kill() {
	if t.killed || t.mech == mechGroup {
		return
	}
	t.killed = true
	if t.lim != nil {
		// Counted before the cgroups go; their own processes are dead.
		t.lim.final.Store(t.lim.oomKills())
		defer t.lim.remove()
	}
	reaper := isReaper()
	var victims []victim
	emptied := false
	switch t.mech {
	case mechCgroup2:
		victims, emptied = killCgroup2(t.dir, reaper)
	case mechCgroup1Pids, mechCgroup1Freeze:
		victims = killCgroup1(t.dir, t.mech == mechCgroup1Freeze)
	}
	if !emptied {
		victims = append(victims, killMarked(t.marker)...)
	}
	if reaper {
		reap(victims)
	}
}

// A victim is a process killed, known by pid and start time (so that a
// reused pid is never mistaken for it).
type victim struct {
	pid   int
	start uint64
}

// procStat is what /proc/<pid>/stat tells us.
type procStat struct {
	state byte
	ppid  int
	start uint64
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name is in parentheses and may hold anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); ppid is field 4, starttime field 22.
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return procStat{state: f[0][0], ppid: ppid, start: start}, true
}

// killPID sends SIGKILL to pid and returns it as a victim (ok false when
// the process is gone or a zombie already).
func killPID(pid int) (victim, bool) {
	st, ok := readStat(pid)
	if !ok || st.state == 'Z' {
		return victim{}, false
	}
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		return victim{}, false
	}
	return victim{pid, st.start}, true
}

// isReaper reports whether orphans are handed to this process.
func isReaper() bool {
	if os.Getpid() == 1 {
		return true
	}
	var v int32
	if _, _, errno := unix.Syscall(unix.SYS_PRCTL, unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0); errno != 0 {
		return false
	}
	return v != 0
}

// reap collects the victims that became our children once they are dead,
// never any other process (os/exec waits for its own).
func reap(victims []victim) {
	me := os.Getpid()
	deadline := time.Now().Add(2 * time.Second)
	for _, v := range victims {
		for {
			st, ok := readStat(v.pid)
			if !ok || st.start != v.start {
				break // gone, or the pid is another process now
			}
			if st.state == 'Z' {
				if st.ppid == me {
					var ws unix.WaitStatus
					unix.Wait4(v.pid, &ws, unix.WNOHANG, nil)
				}
				if st.ppid != me {
					break // its reaper is someone else
				}
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// killMarked kills, until none is left, the processes whose environment
// carries marker and their descendants.
func killMarked(marker string) []victim {
	if marker == "" {
		return nil
	}
	needle := []byte("\x00" + envProcessTree + "=" + marker + "\x00")
	uid := os.Geteuid()
	var victims []victim
	// A process forking while we scan is found on the next pass.
	for pass := 0; pass < 50; pass++ {
		found := false
		parents := map[int][]int{} // ppid -> children
		var marked []int
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return victims
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			st, ok := readStat(pid)
			if !ok || st.state == 'Z' {
				continue
			}
			parents[st.ppid] = append(parents[st.ppid], pid)
			if uid != 0 {
				if fi, err := e.Info(); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(uid) {
					continue
				}
			}
			env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err != nil {
				continue
			}
			if bytes.Contains(append(append([]byte{0}, env...), 0), needle) {
				marked = append(marked, pid)
			}
		}
		seen := map[int]bool{}
		for len(marked) > 0 {
			pid := marked[len(marked)-1]
			marked = marked[:len(marked)-1]
			if seen[pid] {
				continue
			}
			seen[pid] = true
			if v, ok := killPID(pid); ok {
				victims = append(victims, v)
				found = true
			}
			marked = append(marked, parents[pid]...)
		}
		if !found {
			break
		}
	}
	return victims
}

// --- cgroup v2 ---

// makeCgroup2 makes a sub-cgroup of our own cgroup v2 and opens it for
// CLONE_INTO_CGROUP.
func makeCgroup2() (string, *os.File, error) {
	parent, err := ownCgroupDir("cgroup2", "")
	if err != nil {
		return "", nil, err
	}
	// Processes may not live in a cgroup that hands controllers down.
	if b, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control")); err != nil || len(bytes.TrimSpace(b)) > 0 {
		return "", nil, errors.New("the cgroup distributes controllers")
	}
	cleanLeftovers(parent, true)
	return makeCgroup2In(parent)
}

// makeCgroup2In makes a tree's cgroup v2 in parent and opens it for
// CLONE_INTO_CGROUP.
func makeCgroup2In(parent string) (string, *os.File, error) {
	dir := filepath.Join(parent, newCgroupName())
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		os.Remove(dir)
		return "", nil, errors.New("no cgroup.kill (kernel older than 5.14)")
	}
	f, err := os.Open(dir)
	if err != nil {
		os.Remove(dir)
		return "", nil, err
	}
	return dir, f, nil
}

// killCgroup2 kills everything in a cgroup v2 and removes it, reporting
// whether it was emptied. A reaper freezes it first so that the list of
// victims is complete.
func killCgroup2(dir string, reaper bool) (victims []victim, emptied bool) {
	if reaper && os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte("1"), 0) == nil {
		waitCgroupEvent(dir, "frozen 1", time.Second)
		for _, pid := range cgroupPIDs(dir) {
			if st, ok := readStat(pid); ok {
				victims = append(victims, victim{pid, st.start})
			}
		}
	}
	os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	emptied = waitCgroupEvent(dir, "populated 0", 2*time.Second)
	removeCgroup(dir)
	return victims, emptied
}

// waitCgroupEvent polls cgroup.events for a line.
func waitCgroupEvent(dir, line string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if err != nil {
			return false
		}
		if bytes.Contains(b, []byte(line)) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// --- cgroup v1 ---

// makeCgroup1 makes a sub-cgroup of our own cgroup in the v1 hierarchy of
// controller ("pids" or "freezer").
func makeCgroup1(controller string) (string, error) {
	parent, err := ownCgroupDir("cgroup", controller)
	if err != nil {
		return "", err
	}
	cleanLeftovers(parent, false)
	dir := filepath.Join(parent, newCgroupName())
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// killCgroup1 kills everything in a v1 cgroup and removes it. The pids
// controller is set to refuse forks first; the freezer freezes the cgroup
// (its frozen tasks die once thawed).
func killCgroup1(dir string, freezer bool) []victim {
	var victims []victim
	if freezer {
		state := filepath.Join(dir, "freezer.state")
		os.WriteFile(state, []byte("FROZEN"), 0)
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if b, _ := os.ReadFile(state); strings.TrimSpace(string(b)) == "FROZEN" {
				break
			}
		}
		for _, pid := range cgroupPIDs(dir) {
			if v, ok := killPID(pid); ok {
				victims = append(victims, v)
			}
		}
		os.WriteFile(state, []byte("THAWED"), 0)
	} else {
		os.WriteFile(filepath.Join(dir, "pids.max"), []byte("0"), 0)
	}
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		pids := cgroupPIDs(dir)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if v, ok := killPID(pid); ok {
				victims = append(victims, v)
			}
		}
	}
	removeCgroup(dir)
	return victims
}

// --- shared ---

// cgroupPIDs lists the processes of a cgroup, never this one (a thread of
// ours is in a cgroup v1 limit while it forks a CLI: see enterThread).
func cgroupPIDs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// removeCgroup removes an emptied cgroup, retrying briefly while the last
// tasks finish exiting.
func removeCgroup(dir string) {
	for i := 0; i < 50; i++ {
		if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var (
	selfStartOnce sync.Once
	selfStart     uint64
)

// newCgroupName names a cgroup after this process (pid and start time) and
// a random part.
func newCgroupName() string {
	selfStartOnce.Do(func() {
		st, _ := readStat(os.Getpid())
		selfStart = st.start
	})
	return fmt.Sprintf("%s%d-%d-%s", cgroupPrefix, os.Getpid(), selfStart, randomHex(6))
}

// KillLeftovers kills what the tools of CLIs started by an earlier
// process left running, and removes the cgroups that held them, when that
// process is gone without cleaning up (killed with SIGKILL, say): a
// [ProcessTransport] does it when it first starts a CLI, in the cgroups
// it makes its own under; a daemon calls it when it starts, so that what
// an earlier run of it left does not wait for its next CLI. Only cgroups
// of this process's own cgroup (as the earlier process's, when it ran in
// the same one: a service restarted) are looked at; leftovers that only
// an environment variable marked are not found. It does nothing on other
// systems, or where cgroups cannot be written.
func KillLeftovers() {
	if parent, err := ownCgroupDir("cgroup2", ""); err == nil {
		cleanLeftovers(parent, true)
	}
	for _, controller := range []string{"pids", "freezer", "memory", "cpu"} {
		if parent, err := ownCgroupDir("cgroup", controller); err == nil {
			cleanLeftovers(parent, false)
		}
	}
}

var (
	leftoversMu   sync.Mutex
	leftoversDone = map[string]bool{}
)

// cleanLeftovers removes, once per parent and process, the cgroups that a
// host process which is gone left behind (killed before it could clean up),
// killing what still runs in them.
func cleanLeftovers(parent string, v2 bool) {
	leftoversMu.Lock()
	defer leftoversMu.Unlock()
	if leftoversDone[parent] {
		return
	}
	leftoversDone[parent] = true
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		name, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		parts := strings.Split(name, "-")
		if len(parts) != 3 {
			continue
		}
		pid, err1 := strconv.Atoi(parts[0])
		start, err2 := strconv.ParseUint(parts[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.start == start {
			continue // its owner still runs
		}
		dir := filepath.Join(parent, e.Name())
		if v2 {
			killCgroup2(dir, false)
		} else {
			killCgroup1(dir, strings.Contains(parent, "freezer"))
		}
	}
}

// A cgroupMount is one cgroup filesystem from /proc/self/mountinfo.
type cgroupMount struct {
	root, point, fstype, opts string
}

func cgroupMounts() ([]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root point opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 || (b[0] != "cgroup" && b[0] != "cgroup2") {
			continue
		}
		out = append(out, cgroupMount{root: unescapeMount(a[3]), point: unescapeMount(a[4]), fstype: b[0], opts: b[2]})
	}
	return out, sc.Err()
}

// unescapeMount undoes the octal escapes of mountinfo (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				sb.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// ownCgroupDir returns the directory of this process's cgroup in the
// cgroup2 hierarchy (fstype "cgroup2") or in the v1 hierarchy of controller.
func ownCgroupDir(fstype, controller string) (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var path string
	found := false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if fstype == "cgroup2" && parts[0] == "0" && parts[1] == "" ||
			fstype == "cgroup" && contains(strings.Split(parts[1], ","), controller) {
			path, found = parts[2], true
			break
		}
	}
	if !found {
		return "", fmt.Errorf("no %s %s hierarchy", fstype, controller)
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return "", err
	}
	for _, m := range mounts {
		if m.fstype != fstype || fstype == "cgroup" && !contains(strings.Split(m.opts, ","), controller) {
			continue
		}
		rel, ok := strings.CutPrefix(path, m.root)
		if m.root == "/" {
			rel, ok = path, true
		}
		if !ok {
			continue
		}
		dir := filepath.Join(m.point, rel)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%s %s hierarchy not mounted", fstype, controller)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
