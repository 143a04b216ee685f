#!/usr/bin/env bash
# build-otelcol.sh builds a minimal OpenTelemetry Collector (the filelog
# receiver, the otlphttp and otlp exporters) from the collector's Go modules
# into <repo>/bin/tools/otelcol, for the receiver tests that run a real
# collector against quarry (cmd/quarry TestRunFollowCollector). The
# component list is tools/otelcol, its own Go module, so neither quarry's
# go.mod nor its binary carries the collector. The build is skipped when the
# binary there was built from the current tools/otelcol (a hash of its
# files is kept beside the binary).
#
# Usage: scripts/build-otelcol.sh
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$repo/tools/otelcol"
bindir="$repo/bin/tools"
bin="$bindir/otelcol"
want="$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -d' ' -f1)"

if [[ -x "$bin" && -f "$bin.sum" && "$(cat "$bin.sum")" == "$want" ]]; then
	echo "otelcol already at $bin"
	exit 0
fi

mkdir -p "$bindir"
start=$(date +%s)
echo "building otelcol from $src into $bindir (a large build, several minutes)"
cd "$src"
CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -o "$bin" .
echo "$want" >"$bin.sum"
echo "built $bin in $(( $(date +%s) - start ))s"
