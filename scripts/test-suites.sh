#!/bin/sh
# test-suites.sh: make test's Go suites, one after another. Every suite runs even when one
# before it failed (chained with &&, one flaky test skipped the 10,000-session release test
# and the whole PostgreSQL run), each is reported on a line of its own at the end (passed or
# FAILED, and its time), and the script exits 1 if any failed. make test runs it with the
# CLAUDECTL_TEST_* variables the Makefile exports.
#
# With STRESS set to a command (make test-busy: STRESS='stress-ng --cpu 2'), that command runs
# alongside the suites and is stopped at the end: a busy machine shows the tests that wait a
# guessed time instead of for a condition.
set -u
GO=${GO:-go}
STRESS=${STRESS:-}
start=$(date +%s)
report=""
failed=0

stress_pid=""
stop_stress() {
	[ -n "$stress_pid" ] || return 0
	kill "$stress_pid" 2>/dev/null
	wait "$stress_pid" 2>/dev/null
	stress_pid=""
}
trap stop_stress EXIT
trap 'stop_stress; exit 130' INT
trap 'stop_stress; exit 143' TERM
if [ -n "$STRESS" ]; then
	$STRESS &
	stress_pid=$!
	echo "alongside the suites: $STRESS (pid $stress_pid)"
fi

# go test's own timeout (10 minutes a package) is shorter than the claude, internal/cli and
# daemon packages take on a busy 2-core machine (each hit it under stress-ng --cpu 2); a test
# that hangs still ends the run, with the goroutines of the tests that did not end.
timeout=30m

# suite NAME COMMAND...: runs COMMAND and notes how it went.
suite() {
	name=$1
	shift
	echo "== $name"
	t0=$(date +%s)
	if "$@"; then
		result=passed
	else
		result=FAILED
		failed=$((failed + 1))
	fi
	report="$report$(printf '%-6s %6ss  %s' "$result" $(($(date +%s) - t0)) "$name")
"
}

# Every test with -race, one line per package as it ends (internal/tools/testsum).
suite "every package, -race" env GO="$GO" $GO run ./internal/tools/testsum -race -count=1 -timeout $timeout ./...
# The 10,000-session release test, too slow under the race detector.
suite "the 10,000-session release test" \
	env GO="$GO" $GO run ./internal/tools/testsum -count=1 -timeout $timeout -run '^TestEndedSessionsAreReleased$' ./daemon/
# The daemon's tests once more with every test daemon's store on PostgreSQL (a throwaway server
# on loopback, store/postgres/pgtest).
suite "the daemon's tests on PostgreSQL, -race" \
	env GO="$GO" CLAUDECTL_TEST_STORE=postgres $GO run ./internal/tools/testsum -race -count=1 -timeout $timeout ./daemon/

stop_stress
echo
echo "make test's suites:"
printf '%s' "$report"
echo "make test: $(($(date +%s) - start))s in all"
if [ "$failed" -gt 0 ]; then
	echo "FAIL: $failed suite(s) failed"
	exit 1
fi
