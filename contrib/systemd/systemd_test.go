// Package systemd_test checks the service units in contrib/systemd with
// systemd's own verifier.
package systemd_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnitsVerify runs systemd-analyze verify on the system unit and, as
// a user unit, on the user unit: any line it prints (an unknown key, a
// bad value, a missing binary) fails the test. The ExecStart binary is
// pointed at an executable that exists here (the test binary), since
// verify checks that it does; everything else is the file as shipped.
func TestUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		// systemd is in the Debian images the project's machines and CI
		// use; elsewhere (macOS, a slim container) there is nothing to
		// check with.
		if os.Getenv("CI") == "true" {
			t.Fatalf("systemd-analyze is missing (install Debian's systemd package): %v", err)
		}
		t.Skipf("systemd-analyze is not installed, so the units are not verified (install systemd): %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		file, bin string
		user      bool
	}{
		{"claudectl.service", "/usr/local/bin/claudectl", false},
		{"claudectl-user.service", "%h/.local/bin/claudectl", true},
	} {
		t.Run(u.file, func(t *testing.T) {
			text, err := os.ReadFile(u.file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(text, []byte("ExecStart="+u.bin+" ")) {
				t.Fatalf("%s: ExecStart does not run %s", u.file, u.bin)
			}
			for _, want := range []string{"ExecReload=/bin/kill -HUP $MAINPID", "KillMode=mixed", "NoNewPrivileges=yes", "UMask=0077"} {
				if !bytes.Contains(text, []byte(want+"\n")) {
					t.Errorf("%s lacks %s", u.file, want)
				}
			}
			dir := t.TempDir()
			// Installed as claudectl.service either way.
			path := filepath.Join(dir, "claudectl.service")
			if err := os.WriteFile(path, bytes.ReplaceAll(text, []byte(u.bin), []byte(self)), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"verify"}
			cmd := exec.Command(analyze)
			if u.user {
				args = []string{"--user", "verify"}
				run := filepath.Join(dir, "run") // a user manager needs its runtime dir
				if err := os.Mkdir(run, 0o700); err != nil {
					t.Fatal(err)
				}
				cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+run)
			}
			cmd.Args = append(append(cmd.Args, args...), path)
			out, err := cmd.CombinedOutput()
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("systemd-analyze %s %s: %v\n%s", strings.Join(args, " "), u.file, err, out)
			}
		})
	}
}
