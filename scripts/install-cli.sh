#!/usr/bin/env bash
# install-cli.sh VERSION DIR: installs @anthropic-ai/claude-code@VERSION with npm into DIR
# (project-local, never global) and checks that the binary answers --version.
set -euo pipefail
version=${1:?usage: install-cli.sh VERSION DIR}
dir=${2:?usage: install-cli.sh VERSION DIR}
if ! command -v npm >/dev/null; then
  echo "install-cli.sh: npm is not on PATH; install Node.js and npm, then run make test again" >&2
  exit 1
fi
mkdir -p "$dir"
echo "installing @anthropic-ai/claude-code@$version into $dir ..." >&2
[ -f "$dir/package.json" ] || echo '{"name":"claudectl-tools","private":true}' >"$dir/package.json"
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "@anthropic-ai/claude-code@$version" >&2
bin="$dir/node_modules/.bin/claude"
got=$("$bin" --version)
case "$got" in
  "$version"*) echo "installed: $bin ($got)" >&2 ;;
  *) echo "install-cli.sh: $bin --version printed '$got', want $version" >&2; exit 1 ;;
esac
