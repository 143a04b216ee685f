#!/usr/bin/env bash
# build-minio.sh builds the MinIO server from its Go module into
# <repo>/bin/tools/minio for the objstore conformance tests
# (internal/objstore/miniotest). It skips the build when the binary there was
# built from the pinned module version (checked with `go version -m`).
#
# Usage: scripts/build-minio.sh          # build if missing or stale
#        MINIO_VERSION=v0.0.0-... scripts/build-minio.sh
set -euo pipefail

# Pinned: the MinIO module version (github.com/minio/minio has no semver tags,
# so this is the pseudo-version of the commit we test against).
MINIO_VERSION="${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bindir="$repo/bin/tools"
bin="$bindir/minio"

if [[ -x "$bin" ]]; then
	have="$(go version -m "$bin" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/minio/minio" { print $3 }')"
	if [[ "$have" == "$MINIO_VERSION" ]]; then
		echo "minio $MINIO_VERSION already at $bin"
		exit 0
	fi
	echo "minio at $bin is ${have:-unknown}, want $MINIO_VERSION: rebuilding"
fi

mkdir -p "$bindir"
start=$(date +%s)
echo "building minio $MINIO_VERSION into $bindir (a large build, several minutes)"
# Build outside the quarry module so its go.mod is not consulted or touched.
cd "$(mktemp -d)"
CGO_ENABLED=0 GOBIN="$bindir" GOFLAGS=-buildvcs=false go install "github.com/minio/minio@$MINIO_VERSION"
echo "built $bin in $(( $(date +%s) - start ))s"
