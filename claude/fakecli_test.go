package claude_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// fakeCLIEnv names the environment variable that turns the test binary into
// a stand-in CLI (the pattern of the MCP SDK's cmd_test.go). The real CLI is
// used by the e2e tests; the stand-in covers what the real one cannot be made
// to do on demand: ignore signals, print garbage, exit with a given code.
const fakeCLIEnv = "CLAUDECTL_FAKE_CLI_MODE"

func runFakeCLI(mode string) int {
	out := bufio.NewWriter(os.Stdout)
	w := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	if mode == "gatedecho" { // echo once a long line is being written (said on stderr) and SIGUSR1 has come
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		for stdinWaiting() < 32<<10 { // more than the initialize request: a long line's first bytes
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Fprintln(os.Stderr, "gatedecho: input waiting")
		<-usr1
		mode = "echo"
	}
	switch mode {
	case "sink": // reads and discards its input
		io.Copy(io.Discard, os.Stdin)
		return 0
	case "deaf": // never reads its input, never exits on its own
		fmt.Fprintln(os.Stderr, "deaf: not reading stdin")
		for {
			time.Sleep(time.Hour)
		}
	case "stubborn": // ignores stdin EOF and SIGTERM; only SIGKILL ends it
		signal.Ignore(syscall.SIGTERM)
		fmt.Fprintln(os.Stderr, "stubborn: ignoring SIGTERM")
		for {
			time.Sleep(time.Hour)
		}
	case "closeout", "closeout-stubborn", "closeout-exit0", "closeout-exit4":
		// Answers initialize, starts a child that holds none of its pipes,
		// closes its stdout, then keeps running (closeout; -stubborn also
		// ignores SIGTERM) or exits with code 0 or 4 (-exitN).
		var m map[string]any
		line, _ := bufio.NewReader(os.Stdin).ReadBytes('\n')
		json.Unmarshal(line, &m)
		w(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": m["request_id"], "response": map[string]any{"commands": []any{}}}})
		w(map[string]any{"type": "system", "subtype": "init", "session_id": "s-closeout", "model": "m", "tools": []string{}, "cwd": "/"})
		child := exec.Command("sleep", "1000")
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "no child:", err)
			return 2
		}
		fmt.Fprintf(os.Stderr, "child %d\n", child.Process.Pid)
		if mode == "closeout-stubborn" {
			signal.Ignore(syscall.SIGTERM)
		}
		os.Stdout.Close()
		fmt.Fprintln(os.Stderr, "closed stdout")
		switch mode {
		case "closeout-exit0":
			return 0
		case "closeout-exit4":
			return 4
		}
		for {
			time.Sleep(time.Hour)
		}
	case "exit3": // prints to stderr and exits 3 once it gets a line
		bufio.NewReader(os.Stdin).ReadString('\n')
		fmt.Fprintln(os.Stderr, "fatal: something broke in the fake")
		return 3
	case "echo": // minimal protocol: answers initialize, echoes prompts
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				fmt.Fprintln(os.Stderr, "Error parsing streaming input line")
				return 1
			}
			switch m["type"] {
			case "control_request":
				w(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": m["request_id"], "response": map[string]any{"commands": []any{}}}})
			case "user":
				w(map[string]any{"type": "not_json_yet_a_type", "x": 1})
				os.Stdout.WriteString("this line is not JSON\n")
				w(map[string]any{"type": "system", "subtype": "init", "session_id": "s-echo", "model": "m", "tools": []string{"Bash"}, "cwd": "/"})
				w(map[string]any{"type": "assistant", "session_id": "s-echo", "message": map[string]any{"id": "msg_1", "role": "assistant", "content": []any{map[string]any{"type": "text", "text": "echo"}}}})
				w(map[string]any{"type": "result", "subtype": "success", "is_error": false, "result": "echo", "session_id": "s-echo", "num_turns": "1", "duration_ms": "12"})
			}
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown fake mode", mode)
	return 2
}
