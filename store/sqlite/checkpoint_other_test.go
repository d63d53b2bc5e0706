//go:build !linux

package sqlite_test

import (
	"os"
	"testing"
)

func canPreallocate(*testing.T, string) bool { return false }

func allocated(os.FileInfo) int64 { return 0 }
