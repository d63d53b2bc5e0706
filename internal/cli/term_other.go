//go:build !linux

package cli

import "os"

// hasTermAttrs is true: elsewhere a character device on stdin is taken to be
// a terminal.
func hasTermAttrs(*os.File) bool { return true }

// termWidth is unknown (0) elsewhere: the status line assumes 80 columns.
func termWidth(*os.File) int { return 0 }
