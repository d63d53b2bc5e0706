// Command claudectl drives the Claude Code CLI; see "claudectl help".
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/claudectl/claudectl/internal/cli"
)

func main() {
	os.Exit(run())
}

func run() int {
	// Ctrl-C is the commands' to handle (run interrupts the turn first);
	// so is SIGHUP (serve reloads its settings; for the others it is a
	// hung-up terminal and cancels them); SIGTERM cancels everything.
	interrupts := make(chan os.Signal, 4)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	hangups := make(chan os.Signal, 4)
	signal.Notify(hangups, syscall.SIGHUP)
	defer signal.Stop(hangups)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	// The first SIGTERM cancels ctx; a second one, while the command is
	// still stopping, ends the process at once (the default action).
	context.AfterFunc(ctx, stop)

	code := cli.Main(ctx, &cli.Env{Interrupts: interrupts, Hangups: hangups}, os.Args[1:])
	if ctx.Err() != nil && code != cli.ExitOK {
		return 128 + int(syscall.SIGTERM) // terminated
	}
	return code
}
