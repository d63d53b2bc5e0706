#!/usr/bin/env bash
# install-agent-sdk.sh VERSION DIR: installs the official TypeScript SDK
# @anthropic-ai/claude-agent-sdk@VERSION with npm into DIR (project-local, never global),
# without its optional native CLI packages: only its sdk.d.ts is used, by
# claude/parity_test.go, which checks docs/parity.md against it, and by make parity-diff.
set -euo pipefail
version=${1:?usage: install-agent-sdk.sh VERSION DIR}
dir=${2:?usage: install-agent-sdk.sh VERSION DIR}
if ! command -v npm >/dev/null; then
  echo "install-agent-sdk.sh: npm is not on PATH; install Node.js and npm, then run make test again" >&2
  exit 1
fi
mkdir -p "$dir"
echo "installing @anthropic-ai/claude-agent-sdk@$version into $dir ..." >&2
[ -f "$dir/package.json" ] || echo '{"name":"claudectl-tools","private":true}' >"$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --omit=optional --ignore-scripts --loglevel=error \
  "@anthropic-ai/claude-agent-sdk@$version" >&2
pkg="$dir/node_modules/@anthropic-ai/claude-agent-sdk"
got=$(node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).version)' "$pkg/package.json")
if [ "$got" != "$version" ]; then
  echo "install-agent-sdk.sh: $pkg is version $got, want $version" >&2
  exit 1
fi
[ -f "$pkg/sdk.d.ts" ] || { echo "install-agent-sdk.sh: $pkg/sdk.d.ts is missing" >&2; exit 1; }
echo "installed: $pkg/sdk.d.ts ($got)" >&2
