package serve

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// LockedError means another daemon holds the data directory.
type LockedError struct {
	DataDir string
	// Holder is what the other daemon wrote in the lock file: its pid and
	// address ("" if it has not written them yet).
	Holder string
}

func (e *LockedError) Error() string {
	who := "another claudectl serve"
	if e.Holder != "" {
		who += " (" + e.Holder + ")"
	}
	return fmt.Sprintf("%s already uses the data directory %s; stop it, or give this one another --data-dir", who, e.DataDir)
}

// dataDirLock is the lock a daemon holds on its data directory for its
// whole life (flock on claudectl.lock): two daemons on one database would
// number events twice and run one conversation in two CLIs.
type dataDirLock struct {
	f *os.File
}

// lockDataDir makes the data directory (0700; a looser existing one is
// tightened, with a log line) and takes its lock, before anything in it
// is touched.
func lockDataDir(dir string, log *slog.Logger) (*dataDirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("data directory %s is open to other users (mode %04o) and cannot be tightened: %w", dir, fi.Mode().Perm(), err)
		}
		log.Warn("tightened the data directory to 0700: other users could read it, and it holds the sessions' transcripts", "dir", dir,
			"was", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
	path := filepath.Join(dir, "claudectl.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &LockedError{DataDir: dir, Holder: strings.TrimSpace(string(holder))}
		}
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	return &dataDirLock{f: f}, nil
}

// record writes who holds the lock, for the message of a second daemon.
func (l *dataDirLock) record(addr string) {
	l.f.Truncate(0)
	l.f.WriteAt(fmt.Appendf(nil, "pid %d, serving on %s\n", os.Getpid(), addr), 0)
}

// release gives the lock up. Idempotent.
func (l *dataDirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0)
	l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
}

// privateFile makes path exist with mode 0600 (or tightens it): SQLite
// gives its -wal and -shm files the mode of the database file.
func privateFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
