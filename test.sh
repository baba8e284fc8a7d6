#!/usr/bin/env bash
# Runs every test: unit, integration (a real API server over embedded etcd) and
# end-to-end (the real binary and the real kubectl). Tests that need tools this
# machine lacks skip, unless CI=true, where they fail.
set -euo pipefail
cd "$(dirname "$0")"
go test -race -count=1 -timeout 20m ./...
