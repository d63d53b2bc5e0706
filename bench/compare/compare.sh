#!/usr/bin/env bash
# Side-by-side throughput of the official TypeScript SDK and another consumer on the same
# recorded-shape session stream, served by the same stand-in CLI (fakecli.py).
#
# Usage: compare.sh 'OTHER CONSUMER COMMAND' [RUNS]
#   The other command gets the stand-in CLI's path as its last argument, must consume the whole
#   session through its SDK's public API (partial messages on), and print one JSON line with
#   "messages" and "checksum" computed exactly as ts_consume.mjs does.
# Env: SCALE (stream size, 1 = 101k messages / 34 MB; default 5), BENCH_DIR (cache folder),
#   AGENT_SDK_DIR (the folder whose node_modules holds @anthropic-ai/claude-agent-sdk; make bench
#   sets it to the one the Makefile installs into .tools/; unset: installed into BENCH_DIR with npm).
# Needs python3 and GNU time (/usr/bin/time).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
other=${1:?usage: compare.sh 'OTHER COMMAND' [RUNS]}
runs=${2:-5}
scale=${SCALE:-5}
dir=${BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/claudectl-bench}
mkdir -p "$dir/ts"
stream="$dir/stream-$scale.ndjson"
[ -s "$stream" ] || python3 "$here/genstream.py" "$stream" "$scale"
for need in python3 /usr/bin/time node; do
  command -v "$need" >/dev/null || { echo "compare.sh: $need is needed (install it: python3, GNU time, Node.js)" >&2; exit 1; }
done
if [ -n "${AGENT_SDK_DIR:-}" ]; then
  [ -d "$AGENT_SDK_DIR/node_modules/@anthropic-ai/claude-agent-sdk" ] ||
    { echo "compare.sh: no @anthropic-ai/claude-agent-sdk under $AGENT_SDK_DIR/node_modules" >&2; exit 1; }
  rm -rf "$dir/ts/node_modules" && ln -s "$AGENT_SDK_DIR/node_modules" "$dir/ts/node_modules"
elif [ ! -d "$dir/ts/node_modules/@anthropic-ai/claude-agent-sdk" ]; then
  (cd "$dir/ts" && npm init -y >/dev/null && npm install --silent @anthropic-ai/claude-agent-sdk@0.3.329 >/dev/null)
fi
echo "TypeScript SDK $(node -e 'process.stdout.write(require(process.argv[1]).version)' "$dir/ts/node_modules/@anthropic-ai/claude-agent-sdk/package.json")"
cp "$here/ts_consume.mjs" "$dir/ts/"
export FAKECLI_STREAM="$stream"
fake="$here/fakecli.py"
run() { # label cmd... ; prints: label wall_s peak_rss_kb json
  local label=$1; shift
  local out; out=$( { /usr/bin/time -f "TIME %e %M" "$@" 2>&1; } | tail -n 2)
  local json; json=$(printf '%s\n' "$out" | grep '^{' | tail -n 1)
  local t; t=$(printf '%s\n' "$out" | grep '^TIME' | tail -n 1)
  printf '%s %s %s %s\n' "$label" "$(echo "$t" | cut -d' ' -f2)" "$(echo "$t" | cut -d' ' -f3)" "$json"
}
echo "stream: $(wc -l <"$stream") messages, $(du -m "$stream" | cut -f1) MB; $runs runs each, alternating"
results=$(mktemp)
run warmup-ts node "$dir/ts/ts_consume.mjs" "$fake" >/dev/null
# shellcheck disable=SC2086
run warmup-other $other "$fake" >/dev/null
for i in $(seq "$runs"); do
  run ts node "$dir/ts/ts_consume.mjs" "$fake" | tee -a "$results"
  # shellcheck disable=SC2086
  run other $other "$fake" | tee -a "$results"
done
python3 - "$results" <<'PY'
import json, statistics, sys
rows = {"ts": [], "other": []}
for line in open(sys.argv[1]):
    label, wall, rss, js = line.split(" ", 3)
    rows[label].append((float(wall), int(rss), json.loads(js) if js.strip() else {}))
def med(k, i): return statistics.median(r[i] for r in rows[k])
ts_sum = {r[2].get("checksum") for r in rows["ts"]}
ot_sum = {r[2].get("checksum") for r in rows["other"]}
print("checksums: ts=%s other=%s %s" % (ts_sum, ot_sum, "MATCH" if ts_sum == ot_sum else "MISMATCH"))
print("median wall s: ts=%.3f other=%.3f  speedup(ts/other)=%.2fx" % (med("ts", 0), med("other", 0), med("ts", 0) / med("other", 0)))
print("median peak RSS MB: ts=%.1f other=%.1f  ratio(other/ts)=%.2f" % (med("ts", 1) / 1024, med("other", 1) / 1024, med("other", 1) / med("ts", 1)))
PY
rm -f "$results"
