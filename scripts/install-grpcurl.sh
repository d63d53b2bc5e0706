#!/usr/bin/env bash
# install-grpcurl.sh VERSION DESTDIR: installs grpcurl@VERSION (a gRPC client that is not ours,
# used by daemon/api's end-to-end test) into DESTDIR with go install, unless DESTDIR/grpcurl
# is already that version. go install leaves grpcurl's own -version at "dev build", so the
# version is read from the binary's build info (go version -m).
set -euo pipefail
version=${1:?usage: install-grpcurl.sh VERSION DESTDIR}
dest=${2:?usage: install-grpcurl.sh VERSION DESTDIR}
go=${GO:-go}
mod=github.com/fullstorydev/grpcurl
if ! command -v "$go" >/dev/null; then
  echo "install-grpcurl.sh: $go is not on PATH; install Go, then run make test again" >&2
  exit 1
fi
installed() { "$go" version -m "$1" 2>/dev/null | awk -v m="$mod" '$1 == "mod" && $2 == m { print $3 }'; }
mkdir -p "$dest"
dest=$(cd "$dest" && pwd) # GOBIN must be absolute
bin="$dest/grpcurl"
if [ -x "$bin" ] && [ "$(installed "$bin")" = "$version" ]; then
  exit 0
fi
echo "installing $mod/cmd/grpcurl@$version into $dest ..." >&2
GOBIN="$dest" "$go" install "$mod/cmd/grpcurl@$version"
got=$(installed "$bin")
if [ "$got" != "$version" ]; then
  echo "install-grpcurl.sh: $bin is $mod '$got', want $version" >&2
  exit 1
fi
echo "installed: $bin ($mod $got)" >&2
