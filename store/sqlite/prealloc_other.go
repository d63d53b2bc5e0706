//go:build !linux

package sqlite

// preallocate does nothing where the WAL's space cannot be reserved
// ahead (see prealloc_linux.go).
func preallocate(path string, size int64) {}

func worthPreallocating(dir string, size int64) bool { return false }
