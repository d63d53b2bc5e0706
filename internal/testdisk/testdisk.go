// Package testdisk gives tests a small disk to fill: a tmpfs of a chosen
// size, mounted directly when the test runs as root, else in a user and
// mount namespace (unshare -rm) where the test runs again.
package testdisk

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// childEnv names, in the child that runs the test again, the tmpfs its
// parent mounted for it.
const childEnv = "CLAUDECTL_TEST_SMALL_DISK"

// Small returns a directory on a fresh tmpfs of size (such as "6m"), or
// runs the test again in a user and mount namespace that mounts one and
// returns "": the child did the test, and the caller returns at once.
// Without either it skips the test, or fails it under CI=true.
func Small(t *testing.T, size string) string {
	if dir := os.Getenv(childEnv); dir != "" {
		return dir
	}
	dir := t.TempDir()
	if os.Getuid() == 0 {
		err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size)
		if err == nil {
			t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
			return dir
		}
		t.Logf("mount tmpfs: %v; trying unshare", err)
	}
	if unshare, err := exec.LookPath("unshare"); err == nil {
		cmd := exec.Command(unshare, "-rm", "sh", "-c", `mount -t tmpfs -o size="$1" tmpfs "$2" && exec "$3" -test.run "^$4\$" -test.v -test.count=1`,
			"sh", size, dir, os.Args[0], t.Name())
		cmd.Env = append(os.Environ(), childEnv+"="+dir)
		out, err := cmd.CombinedOutput()
		switch {
		case err == nil && strings.Contains(string(out), "--- PASS: "+t.Name()):
			t.Logf("ran in a mount namespace:\n%s", out)
			return ""
		case strings.Contains(string(out), "=== RUN"):
			t.Fatalf("the test failed in its mount namespace: %v\n%s", err, out)
		}
		t.Logf("unshare: %v\n%s", err, out)
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("cannot mount a small tmpfs: neither root nor unshare -rm works")
	}
	t.Skip("cannot mount a small tmpfs: neither root nor unshare -rm works")
	return ""
}
