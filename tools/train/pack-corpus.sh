#!/usr/bin/env bash
# Packs the Go standard library's source ($(go env GOROOT)/src) into
# .corpus/gosrc.tar.xz at the repository root: every .go file (tests included),
# no testdata folders, nothing else. The archive is deterministic for a given
# Go release (sorted names, fixed mtime and owner) and records the Go version
# in .corpus/GOVERSION. .corpus/ is ignored through .git/info/exclude and is
# sent to the GPU machine with the device tool's `carry: [".corpus"]`.
set -euo pipefail
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
goroot=$(go env GOROOT)
out="$root/.corpus"
mkdir -p "$out"
excl="$(git -C "$root" rev-parse --git-path info/exclude)"
grep -qx '/.corpus/' "$excl" 2>/dev/null || echo '/.corpus/' >>"$excl"
list=$(mktemp)
trap 'rm -f "$list"' EXIT
( cd "$goroot/src" && find . -type d -name testdata -prune -o -type f -name '*.go' -print \
    | sed 's|^\./||' | LC_ALL=C sort >"$list" )
tar -C "$goroot/src" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    -cf - -T "$list" | xz -6 -T0 >"$out/gosrc.tar.xz.tmp"
mv "$out/gosrc.tar.xz.tmp" "$out/gosrc.tar.xz"
go version >"$out/GOVERSION"
echo "packed $(wc -l <"$list") files from $goroot/src into $out/gosrc.tar.xz ($(du -h "$out/gosrc.tar.xz" | cut -f1))"
