package sqlite_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/claudectl/claudectl/store/sqlite"
)

// canPreallocate reports whether the store preallocates its WAL in the
// test's temporary directory: a file system on disk that supports
// fallocate and has room (see preallocate).
func canPreallocate(t *testing.T, dir string) bool {
	if !sqlite.PreallocatesIn(dir) {
		return false
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return syscall.Fallocate(int(f.Fd()), 0x01, 0, 1<<20) == nil
}

// allocated returns the bytes of disk the file holds.
func allocated(fi os.FileInfo) int64 { return fi.Sys().(*syscall.Stat_t).Blocks * 512 }
