//go:build race

package daemon_test

// raceEnabled: the race detector slows the daemon about tenfold.
const raceEnabled = true
