// Command testsum runs "go test -json" with its arguments and prints one
// line per package as it finishes, the output of the tests that failed,
// the packages still running every 30 seconds, and the total time. It
// exits 1 when go test fails (a test, a build, a vet check) and 2 when it
// cannot run go test. make test uses it:
//
//	go run ./internal/tools/testsum -race -count=1 ./...
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	start := time.Now()
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.Command(goBin, append([]string{"test", "-json"}, os.Args[1:]...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
	s := newSummary(os.Stdout)
	stop := s.tickEvery(30 * time.Second)
	s.read(out)
	stop()
	werr := cmd.Wait()
	failed := s.finish(time.Since(start), werr)
	if failed {
		os.Exit(1)
	}
}

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // of build-output and build-fail
	Test       string
	Elapsed    float64
	Output     string
}

// summary follows the packages of one go test run.
type summary struct {
	w       io.Writer
	mu      sync.Mutex
	started map[string]time.Time // running packages
	output  map[string][]string  // per package, then per test: "pkg" or "pkg\x00Test"
	tests   map[string]int       // tests passed per package
	failed  []string             // packages that failed
	done    int                  // packages finished
	now     func() time.Time
}

func newSummary(w io.Writer) *summary {
	return &summary{w: w, started: map[string]time.Time{}, output: map[string][]string{},
		tests: map[string]int{}, now: time.Now}
}

// read consumes go test -json's output; lines that are not JSON (go's own
// messages) are printed as they are.
func (s *summary) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			s.mu.Lock()
			fmt.Fprintf(s.w, "%s\n", line)
			s.mu.Unlock()
			continue
		}
		s.event(&e)
	}
}

func (s *summary) event(e *event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := e.Package
	if e.Test != "" {
		key += "\x00" + e.Test
	}
	switch e.Action {
	case "start":
		s.started[e.Package] = s.now()
	case "output":
		s.output[key] = append(s.output[key], e.Output)
	case "build-output":
		s.output["build\x00"+e.ImportPath] = append(s.output["build\x00"+e.ImportPath], e.Output)
	case "build-fail": // the package's fail event follows
		fmt.Fprint(s.w, strings.Join(s.output["build\x00"+e.ImportPath], ""))
		delete(s.output, "build\x00"+e.ImportPath)
	case "pass", "skip":
		if e.Test == "" {
			s.packageDone(e, "ok  ")
		} else {
			if e.Action == "pass" {
				s.tests[e.Package]++
			}
			delete(s.output, key)
		}
	case "fail":
		if e.Test != "" {
			fmt.Fprintf(s.w, "--- FAIL: %s (%s)\n%s", e.Test, e.Package, strings.Join(s.output[key], ""))
			delete(s.output, key)
			return
		}
		s.failed = append(s.failed, e.Package)
		s.packageDone(e, "FAIL")
	}
}

// packageDone prints the line of a finished package. A failed package's
// tests that never ended are printed first, with their output: a panic or
// a timeout (go test -timeout) ends the test binary inside them, and
// go test -json reports no end for them, only the package's failure.
func (s *summary) packageDone(e *event, status string) {
	s.done++
	delete(s.started, e.Package)
	var unended []string
	for key := range s.output {
		if test, ok := strings.CutPrefix(key, e.Package+"\x00"); ok {
			unended = append(unended, test)
		}
	}
	sort.Strings(unended)
	for _, test := range unended {
		key := e.Package + "\x00" + test
		if status == "FAIL" {
			fmt.Fprintf(s.w, "--- FAIL: %s (%s) did not end\n%s", test, e.Package, strings.Join(s.output[key], ""))
		}
		delete(s.output, key)
	}
	out := strings.Join(s.output[e.Package], "")
	delete(s.output, e.Package)
	detail := fmt.Sprintf("%6.1fs", e.Elapsed)
	switch {
	case strings.Contains(out, "[no test files]"):
		detail = "(no test files)"
	case s.tests[e.Package] > 0:
		detail += fmt.Sprintf("  %d tests", s.tests[e.Package])
	}
	fmt.Fprintf(s.w, "[%3d] %s %-50s %s\n", s.done, status, e.Package, detail)
	if status == "FAIL" && strings.TrimSpace(out) != "" && !strings.Contains(out, "--- FAIL") {
		fmt.Fprint(s.w, out) // a panic, a TestMain failure, a timeout
	}
}

// tickEvery prints the packages still running every d; stop ends it.
func (s *summary) tickEvery(d time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.tick()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (s *summary) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.started) == 0 {
		return
	}
	var running []string
	for p, t := range s.started {
		running = append(running, fmt.Sprintf("%s (%s)", p, s.now().Sub(t).Round(time.Second)))
	}
	sort.Strings(running)
	fmt.Fprintf(s.w, "      ... running: %s\n", strings.Join(running, ", "))
}

// finish prints the total and reports whether the run failed: a package
// failed, or go test itself did (waitErr).
func (s *summary) finish(total time.Duration, waitErr error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	total = total.Round(100 * time.Millisecond)
	if len(s.failed) > 0 || waitErr != nil {
		slices.Sort(s.failed)
		fmt.Fprintf(s.w, "FAIL: %d of %d packages failed in %s: %s\n", len(s.failed), s.done, total, strings.Join(s.failed, " "))
		if waitErr != nil && len(s.failed) == 0 {
			fmt.Fprintf(s.w, "go test: %v\n", waitErr)
		}
		return true
	}
	fmt.Fprintf(s.w, "ok: %d packages in %s\n", s.done, total)
	return false
}
