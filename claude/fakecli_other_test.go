//go:build !linux

package claude_test

import "time"

// stdinWaiting guesses, after a second, that a long line is being written
// to the stand-in's stdin: only Linux's pipes say how much waits in them
// here.
func stdinWaiting() int {
	time.Sleep(time.Second)
	return 1 << 30
}
