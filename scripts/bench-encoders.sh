#!/usr/bin/env bash
# Encoder scale-out: prints a markdown table (header and one row per count)
# of lines, seconds and lines/s for 1, 2 and 4 encoder processes on the same
# input, measured in one run. Each count gets a fresh NATS server process and
# lake: the WAL and the work queue are preloaded (producer --generate, miner),
# a committer runs, then the encoders start and the clock runs until the
# lake's high-water covers the WAL. Called by scripts/bench.sh.
#   BENCH_ENCODERS=1,2,4  BENCH_ENCODER_LINES=100000 (per tenant, 3 tenants)
set -euo pipefail
cd "$(dirname "$0")/.."
counts=${BENCH_ENCODERS:-1,2,4}
lines=${BENCH_ENCODER_LINES:-100000}
bin=${QUARRY_BIN:-}
if [ -z "$bin" ]; then
	CGO_ENABLED=0 go build -o bin/quarry ./cmd/quarry
	bin=$PWD/bin/quarry
fi
out=$(cd e2e && QUARRY_BIN="$bin" go test -v -tags chaos -count=1 -timeout 60m -run '^TestBenchEncoders$' ./chaos/ \
	-args -bench-encoders="$counts" -bench-lines="$lines") || { echo "$out" >&2; exit 1; }
echo "$out" | grep -E '^\|'
