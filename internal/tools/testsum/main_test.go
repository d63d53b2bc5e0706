package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const run = `{"Action":"start","Package":"example.com/a"}
{"Action":"run","Package":"example.com/a","Test":"TestOK"}
{"Action":"output","Package":"example.com/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"pass","Package":"example.com/a","Test":"TestOK","Elapsed":0.1}
{"Action":"start","Package":"example.com/b"}
{"Action":"output","Package":"example.com/b","Test":"TestBad","Output":"    b_test.go:9: got 1, want 2\n"}
{"Action":"fail","Package":"example.com/b","Test":"TestBad","Elapsed":0.2}
go: downloading example.com/dep v1.0.0
{"Action":"output","Package":"example.com/a","Output":"ok  \texample.com/a\t0.5s\n"}
{"Action":"pass","Package":"example.com/a","Elapsed":0.5}
{"Action":"fail","Package":"example.com/b","Elapsed":1.5}
{"Action":"start","Package":"example.com/c"}
{"Action":"output","Package":"example.com/c","Output":"?   \texample.com/c\t[no test files]\n"}
{"Action":"skip","Package":"example.com/c","Elapsed":0}
`

func TestSummary(t *testing.T) {
	var b strings.Builder
	s := newSummary(&b)
	s.read(strings.NewReader(run))
	if !s.finish(3*time.Second, nil) {
		t.Error("finish reports success with a failed package")
	}
	out := b.String()
	for _, want := range []string{
		"--- FAIL: TestBad (example.com/b)\n    b_test.go:9: got 1, want 2\n",
		"go: downloading example.com/dep v1.0.0\n",
		"[  1] ok   example.com/a", "0.5s  1 tests\n",
		"[  2] FAIL example.com/b",
		"[  3] ok   example.com/c", "(no test files)",
		"FAIL: 1 of 3 packages failed in 3s: example.com/b\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "=== RUN   TestOK") {
		t.Errorf("a passing test's output is printed:\n%s", out)
	}
}

func TestSummaryGoTestFailedAlone(t *testing.T) {
	var b strings.Builder
	s := newSummary(&b)
	s.read(strings.NewReader(`{"Action":"start","Package":"example.com/a"}` + "\n" + `{"Action":"pass","Package":"example.com/a","Elapsed":1}` + "\n"))
	if s.finish(time.Second, nil) {
		t.Errorf("a passing run failed:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "ok: 1 packages in 1s") {
		t.Errorf("no total:\n%s", b.String())
	}
	// go test failed without a failing package (a vet or setup error).
	if !s.finish(time.Second, errors.New("exit status 1")) {
		t.Error("go test's failure is not reported")
	}
}

func TestSummaryTick(t *testing.T) {
	var b strings.Builder
	s := newSummary(&b)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return t0 }
	s.event(&event{Action: "start", Package: "example.com/slow"})
	s.now = func() time.Time { return t0.Add(95 * time.Second) }
	s.tick()
	if !strings.Contains(b.String(), "running: example.com/slow (1m35s)") {
		t.Errorf("tick: %q", b.String())
	}
}

func TestSummaryBuildFailure(t *testing.T) {
	var b strings.Builder
	s := newSummary(&b)
	s.read(strings.NewReader(`{"ImportPath":"example.com/b [example.com/b.test]","Action":"build-output","Output":"b.go:2:12: undefined: nope\n"}
{"ImportPath":"example.com/b [example.com/b.test]","Action":"build-fail"}
{"Action":"start","Package":"example.com/b"}
{"Action":"output","Package":"example.com/b","Output":"FAIL\texample.com/b [build failed]\n"}
{"Action":"fail","Package":"example.com/b","Elapsed":0}
`))
	if !s.finish(time.Second, errors.New("exit status 1")) {
		t.Error("a build failure passed")
	}
	out := b.String()
	if !strings.Contains(out, "b.go:2:12: undefined: nope\n") || !strings.Contains(out, "[  1] FAIL example.com/b") || strings.Count(out, "] FAIL") != 1 {
		t.Errorf("build failure output:\n%s", out)
	}
}

// TestSummaryTimeout: a test binary that panics or times out inside a
// test ends without the test's end: the package's failure must show that
// test's output (the panic, the goroutines), not only "FAIL pkg".
func TestSummaryTimeout(t *testing.T) {
	var b strings.Builder
	s := newSummary(&b)
	s.read(strings.NewReader(`{"Action":"start","Package":"example.com/a"}
{"Action":"run","Package":"example.com/a","Test":"TestDone"}
{"Action":"output","Package":"example.com/a","Test":"TestDone","Output":"=== RUN   TestDone\n"}
{"Action":"pass","Package":"example.com/a","Test":"TestDone","Elapsed":0}
{"Action":"run","Package":"example.com/a","Test":"TestSlow"}
{"Action":"output","Package":"example.com/a","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Action":"output","Package":"example.com/a","Test":"TestSlow","Output":"panic: test timed out after 10m0s\n"}
{"Action":"output","Package":"example.com/a","Test":"TestSlow","Output":"\trunning tests:\n\t\tTestSlow (9m58s)\n"}
{"Action":"output","Package":"example.com/a","Output":"FAIL\texample.com/a\t600.0s\n"}
{"Action":"fail","Package":"example.com/a","Elapsed":600}
`))
	if !s.finish(time.Second, errors.New("exit status 1")) {
		t.Error("a timed out package passed")
	}
	out := b.String()
	for _, want := range []string{
		"--- FAIL: TestSlow (example.com/a) did not end\n=== RUN   TestSlow\npanic: test timed out after 10m0s\n\trunning tests:\n\t\tTestSlow (9m58s)\n",
		"[  1] FAIL example.com/a",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "TestDone") {
		t.Errorf("the test that passed is printed:\n%s", out)
	}
	if i, j := strings.Index(out, "did not end"), strings.Index(out, "] FAIL"); i > j {
		t.Errorf("the test that did not end is printed after its package's line:\n%s", out)
	}
}
