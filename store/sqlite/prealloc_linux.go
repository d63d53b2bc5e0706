package sqlite

import (
	"os"
	"path/filepath"
	"syscall"
)

// preallocate gives the file at path (the WAL) size bytes of disk without
// changing its length (FALLOC_FL_KEEP_SIZE): SQLite sees the file it
// wrote, and the writer's commits that grow it land on blocks already
// allocated. On ext4 a commit that had to allocate a block while the
// checkpointer's fsync was writing the file back waited for it, for over
// ten milliseconds at times, holding every session's lines (the daemon's
// lockstep benchmark: mid-turn p99 5–15 ms before, 2–4 ms after).
//
// Best effort, and only where it pays: not on a file system in memory
// (tmpfs, ramfs: nothing to allocate, and the space would be memory), nor
// on one with less than minFreeFactor times size free, where the space is
// better left to the data. Without it the WAL grows as it always did.
func preallocate(path string, size int64) {
	if !worthPreallocating(filepath.Dir(path), size) {
		return
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer f.Close()
	const keepSize = 0x01 // FALLOC_FL_KEEP_SIZE
	syscall.Fallocate(int(f.Fd()), keepSize, 0, size)
}

// worthPreallocating reports whether preallocate takes size bytes in dir.
func worthPreallocating(dir string, size int64) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	const tmpfsMagic, ramfsMagic = 0x01021994, 0x858458f6
	return st.Type != tmpfsMagic && st.Type != ramfsMagic && int64(st.Bavail)*st.Bsize >= minFreeFactor*size
}

// minFreeFactor is how many times the WAL's size must be free for
// preallocate to take it.
const minFreeFactor = 16
