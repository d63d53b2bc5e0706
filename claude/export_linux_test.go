package claude

// SetTreeMechanism makes every ProcessTransport try only mechanism m
// ("cgroup2", "cgroup1-pids", "cgroup1-freezer", "environ" or
// "process-group") to end the CLI's processes, and forget which cgroups it
// already cleaned of leftovers; it returns a function that restores both.
func SetTreeMechanism(m string) (reset func()) {
	old := forceTreeMech
	forceTreeMech = m
	leftoversMu.Lock()
	leftoversDone = map[string]bool{}
	leftoversMu.Unlock()
	return func() { forceTreeMech = old }
}

// TreeMechanism returns the mechanism that holds a ProcessTransport
// connection's processes, and its cgroup directory if it has one.
func TreeMechanism(c Conn) (mech, dir string) {
	p := c.(*process)
	return p.tree.mech, p.tree.dir
}

// ConnPID returns the pid of a ProcessTransport connection's CLI.
func ConnPID(c Conn) int { return c.(*process).cmd.Process.Pid }

// OwnCgroupDir exposes the directory of our own cgroup: fstype "cgroup2",
// or "cgroup" and a v1 controller.
var OwnCgroupDir = ownCgroupDir

// CgroupPrefix is how the names of our cgroups begin.
const CgroupPrefix = cgroupPrefix

// EnvProcessTree names the marker variable.
const EnvProcessTree = envProcessTree
