#!/usr/bin/env bash
# Runs every test: unit, integration (a real API server over embedded etcd) and
# end-to-end (the real binary and the real kubectl). Tests that need tools this
# machine lacks skip, unless CI=true, where they fail.
#
# Same as `go test -race ./...`, in two phases so the long end-to-end package does
# not run alone at the end: first the packages whose tests touch this machine
# (containers, mounts, iptables, nginx: their tests call needs.Root), then
# test/e2e, which starts its own clusters, beside every other package.
set -euo pipefail
cd "$(dirname "$0")"
flags=(-race -count=1 -timeout 20m)
e2e=github.com/kubette/kubette/test/e2e
host=() rest=()
while read -r pkg dir; do
  [ "$pkg" = "$e2e" ] && continue
  if grep -qs 'needs\.Root(' "$dir"/*_test.go; then host+=("$pkg"); else rest+=("$pkg"); fi
done < <(go list -f '{{.ImportPath}} {{.Dir}}' ./...)
rc=0
go test "${flags[@]}" "${host[@]}" || rc=$?
log=$(mktemp)
trap 'rm -f "$log"' EXIT
go test "${flags[@]}" "$e2e" > "$log" 2>&1 &
e2epid=$!
go test "${flags[@]}" "${rest[@]}" || rc=$?
wait "$e2epid" || rc=$?
cat "$log"
exit "$rc"
