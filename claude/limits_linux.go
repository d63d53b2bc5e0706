package claude

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Resource limits are written into the cgroups that hold a CLI's tree:
//
//   - cgroup v2, when the controllers are in the unified hierarchy: the
//     tree's own cgroup (the one the CLI is born in) gets memory.max,
//     memory.swap.max, cpu.max and pids.max before the CLI starts. Its
//     parent must hand the controllers down: when our own cgroup does not
//     and holds no process but ours (a systemd service with Delegate=yes),
//     this process moves itself into a leaf, claudectl-supervisor, and
//     enables them in its old cgroup's subtree_control once; the trees
//     are made there, beside it.
//   - cgroup v1 (a hybrid or legacy host): a child of our own cgroup in
//     the memory, cpu and pids hierarchies each, holding the limit, which
//     the CLI joins just after it starts (what it forks before that is
//     not held; the CLI forks nothing that early).

// supervisorCgroup is the leaf this process moves into when it delegates
// controllers to its trees (see above).
const supervisorCgroup = cgroupPrefix + "supervisor"

// controllersFor lists the controllers l needs.
func controllersFor(l ResourceLimits) []string {
	var c []string
	if l.MemoryMax > 0 {
		c = append(c, "memory")
	}
	if l.CPUMax > 0 {
		c = append(c, "cpu")
	}
	if l.PIDsMax > 0 {
		c = append(c, "pids")
	}
	return c
}

// cgroupLimits are a tree's limits and the cgroups that hold them.
type cgroupLimits struct {
	limits ResourceLimits
	v2     string            // the tree's cgroup v2 holding them, or ""
	v1     map[string]string // controller → the cgroup v1 the CLI is born in
	// v1parent is, by controller, the cgroup v1 the limit's is made in:
	// ours, where the forking thread comes back to.
	v1parent map[string]string
	// memFile is the file whose "oom_kill N" line counts the tree's OOM
	// kills ("" without a memory limit); set before the CLI starts.
	memFile string
	// seen is the count of OOM kills last reported by memoryKills, final
	// the count read as the tree was killed (-1 before).
	seen, final atomic.Int64
}

// oomKills reads how many of the tree's processes the kernel killed for
// its memory limit; -1 when it cannot tell (the cgroup is gone).
func (c *cgroupLimits) oomKills() int64 {
	f := c.memFile
	if f == "" {
		return -1
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// memoryKills returns how many processes of the tree the memory limit has
// killed so far (0 when it has none or cannot tell). Safe to call at any
// time, from any goroutine.
func (c *cgroupLimits) memoryKills() int64 {
	if n := c.oomKills(); n >= 0 {
		c.seen.Store(n)
		return n
	}
	if n := c.final.Load(); n >= 0 {
		return n
	}
	return c.seen.Load()
}

// killedByMemory reports whether the memory limit killed a process of the
// tree since memoryKills last looked: the CLI, when it was killed by
// SIGKILL. Called once the tree is dead.
func (c *cgroupLimits) killedByMemory() bool {
	return c.limits.MemoryMax > 0 && c.final.Load() > c.seen.Load()
}

// newCgroupLimits makes the cgroups holding l for a new tree. With v2 set
// (the tree's cgroup v2 may hold them) it returns the parent to make the
// tree's cgroup in, and writes nothing yet (writeV2 does, once it exists).
func newCgroupLimits(l ResourceLimits) (c *cgroupLimits, v2parent string, err error) {
	c = &cgroupLimits{limits: l}
	c.final.Store(-1)
	ctrls := controllersFor(l)
	parent, err2 := limitsParentV2(ctrls)
	if err2 == nil {
		return c, parent, nil
	}
	c.v1, c.v1parent = map[string]string{}, map[string]string{}
	for _, ctrl := range ctrls {
		parent, err := ownCgroupDir("cgroup", ctrl)
		if err != nil {
			c.remove()
			return nil, "", &LimitsError{Limits: l, Reason: fmt.Sprintf(
				"no cgroup hierarchy holds the %s controller here (cgroup v2: %v; cgroup v1: %v)", ctrl, err2, err)}
		}
		cleanLeftovers(parent, false)
		dir := filepath.Join(parent, newCgroupName())
		if err := os.Mkdir(dir, 0o755); err != nil {
			c.remove()
			return nil, "", &LimitsError{Limits: l, Reason: fmt.Sprintf("making a cgroup in the %s hierarchy: %v", ctrl, err)}
		}
		c.v1[ctrl], c.v1parent[ctrl] = dir, parent
		if err := writeV1Limit(dir, ctrl, l); err != nil {
			c.remove()
			return nil, "", &LimitsError{Limits: l, Reason: err.Error()}
		}
	}
	if dir := c.v1["memory"]; dir != "" {
		c.memFile = filepath.Join(dir, "memory.oom_control")
	}
	return c, "", nil
}

// writeV1Limit writes ctrl's part of l into a cgroup v1 of that controller.
func writeV1Limit(dir, ctrl string, l ResourceLimits) error {
	switch ctrl {
	case "memory":
		n := strconv.FormatInt(l.MemoryMax, 10)
		if err := writeCgroupFile(dir, "memory.limit_in_bytes", n); err != nil {
			return err
		}
		// Memory and swap together: nothing beyond the limit (absent
		// without swap accounting).
		if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
			return writeCgroupFile(dir, "memory.memsw.limit_in_bytes", n)
		}
	case "cpu":
		period := int64(100000)
		if b, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us")); err == nil {
			if p, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && p > 0 {
				period = p
			}
		}
		return writeCgroupFile(dir, "cpu.cfs_quota_us", strconv.FormatInt(cpuQuota(l.CPUMax, period), 10))
	case "pids":
		return writeCgroupFile(dir, "pids.max", strconv.FormatInt(l.PIDsMax, 10))
	}
	return nil
}

// cpuQuota is the time per period (µs) of cpus CPUs, at least 1 ms (the
// kernel's least).
func cpuQuota(cpus float64, period int64) int64 {
	return max(int64(cpus*float64(period)), 1000)
}

// writeV2 writes the limits into the tree's cgroup v2 dir.
func (c *cgroupLimits) writeV2(dir string) error {
	l := c.limits
	if l.MemoryMax > 0 {
		if err := writeCgroupFile(dir, "memory.max", strconv.FormatInt(l.MemoryMax, 10)); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
			if err := writeCgroupFile(dir, "memory.swap.max", "0"); err != nil {
				return err
			}
		}
	}
	if l.CPUMax > 0 {
		if err := writeCgroupFile(dir, "cpu.max", fmt.Sprintf("%d %d", cpuQuota(l.CPUMax, 100000), 100000)); err != nil {
			return err
		}
	}
	if l.PIDsMax > 0 {
		if err := writeCgroupFile(dir, "pids.max", strconv.FormatInt(l.PIDsMax, 10)); err != nil {
			return err
		}
	}
	c.v2 = dir
	if l.MemoryMax > 0 {
		c.memFile = filepath.Join(dir, "memory.events")
	}
	return nil
}

func writeCgroupFile(dir, name, value string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0); err != nil {
		return fmt.Errorf("setting %s to %s in %s: %w", name, value, dir, err)
	}
	return nil
}

// enterThread moves the calling thread, locked to its goroutine, into the
// cgroup v1 limits, so that the CLI it forks is born in them; leave moves
// it back. In cgroup v1 a thread may be in other cgroups than its process:
// nothing of this process but the thread is moved, and only for the fork
// (the memory the process holds stays charged to its own cgroup).
func (c *cgroupLimits) enterThread() (leave func(), err error) {
	tid := strconv.Itoa(unix.Gettid())
	var entered []string
	leave = func() {
		for _, ctrl := range entered {
			// Back where it came from: as allowed as leaving was. Were it
			// refused, the thread would stay limited, and the limit's
			// cgroup could not be removed (a kill of its members spares
			// this process).
			writeCgroupFile(c.v1parent[ctrl], "tasks", tid)
		}
	}
	for ctrl, dir := range c.v1 {
		if err := writeCgroupFile(dir, "tasks", tid); err != nil {
			leave()
			return nil, &LimitsError{Limits: c.limits, Reason: fmt.Sprintf("the CLI could not be started in its %s cgroup: %v", ctrl, err)}
		}
		entered = append(entered, ctrl)
	}
	return leave, nil
}

// join makes sure the CLI (pid) is in the cgroup v1 limits it was born in.
func (c *cgroupLimits) join(pid int) error {
	for ctrl, dir := range c.v1 {
		if err := writeCgroupFile(dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return &LimitsError{Limits: c.limits, Reason: fmt.Sprintf("the CLI could not join its %s cgroup: %v", ctrl, err)}
		}
	}
	return nil
}

// v1dir returns the cgroup v1 holding ctrl's limit, "" if none (or c is
// nil).
func (c *cgroupLimits) v1dir(ctrl string) string {
	if c == nil {
		return ""
	}
	return c.v1[ctrl]
}

// untrack leaves ctrl's cgroup v1 to the tree's tracking, which joins the
// CLI to it and removes it.
func (c *cgroupLimits) untrack(ctrl string) { delete(c.v1, ctrl) }

func (c *cgroupLimits) remove() {
	for ctrl, dir := range c.v1 {
		killCgroup1(dir, false)
		delete(c.v1, ctrl)
	}
}

var (
	delegateMu     sync.Mutex
	delegatedTo    string // the cgroup our trees with limits are made in, once delegated
	delegatedCtrls []string
)

// limitsParentV2 returns the cgroup v2 in which a tree's cgroup can take
// ctrls, delegating them from our own cgroup the first time if it must
// and can (see the top of this file).
func limitsParentV2(ctrls []string) (string, error) {
	delegateMu.Lock()
	defer delegateMu.Unlock()
	if delegatedTo != "" {
		for _, c := range ctrls {
			if !slices.Contains(delegatedCtrls, c) {
				return "", fmt.Errorf("the %s controller was not delegated", c)
			}
		}
		return delegatedTo, nil
	}
	own, err := ownCgroupDir("cgroup2", "")
	if err != nil {
		return "", err
	}
	avail := cgroupList(filepath.Join(own, "cgroup.controllers"))
	for _, c := range ctrls {
		if !slices.Contains(avail, c) {
			return "", fmt.Errorf("the %s controller is not available in %s", c, own)
		}
	}
	if sub := cgroupList(filepath.Join(own, "cgroup.subtree_control")); containsAll(sub, ctrls) {
		return own, nil // handed down already (the root cgroup)
	}
	if procs := cgroupPIDs(own); len(procs) > 0 { // ours left out
		return "", fmt.Errorf("our cgroup %s holds other processes (%d), so it cannot hand the %s controllers down: run the program in a cgroup of its own (a systemd service with Delegate=yes)",
			own, len(procs), strings.Join(ctrls, ", "))
	}
	leaf := filepath.Join(own, supervisorCgroup)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("making %s: %w", leaf, err)
	}
	if err := writeCgroupFile(leaf, "cgroup.procs", strconv.Itoa(os.Getpid())); err != nil {
		os.Remove(leaf)
		return "", err
	}
	want := slices.Clone(avail)
	want = slices.DeleteFunc(want, func(c string) bool { return c != "memory" && c != "cpu" && c != "pids" })
	enable := "+" + strings.Join(want, " +")
	if err := writeCgroupFile(own, "cgroup.subtree_control", enable); err != nil {
		writeCgroupFile(own, "cgroup.procs", strconv.Itoa(os.Getpid())) // back where we were
		os.Remove(leaf)
		return "", err
	}
	delegatedTo, delegatedCtrls = own, want
	return own, nil
}

// cgroupList reads a space-separated list of controllers.
func cgroupList(file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	return strings.Fields(string(bytes.TrimSpace(b)))
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// CheckLimits reports whether l can be applied to the CLIs this process
// starts: nil, or a *LimitsError saying why not. It makes and removes the
// cgroups a CLI would get.
func CheckLimits(l ResourceLimits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if l.IsZero() {
		return nil
	}
	t, err := newProcTree(false, l)
	if err != nil {
		return err
	}
	t.abandon()
	return nil
}
