#!/usr/bin/env bash
# images.sh builds quarry's container images with no registry: static
# binaries (CGO_ENABLED=0) copied into FROM-scratch images, plus the host's
# CA certificates. Nothing is pulled.
#
#   quarrylake/quarry:$TAG       cmd/quarry
#   quarrylake/nats-server:$TAG  github.com/nats-io/nats-server/v2 (the version in go.mod)
#   quarrylake/minio:$TAG        github.com/minio/minio (pinned in scripts/build-minio.sh)
#
# The build is cached: binaries are built reproducibly (-trimpath), MinIO only
# when its pinned version changed (scripts/build-minio.sh), and an image is
# rebuilt only when the sha256 of its build context differs from the
# quarry.context label of the existing image.
#
# Usage: scripts/images.sh            # all three
#        TAG=v1 scripts/images.sh quarry nats
set -euo pipefail

TAG="${TAG:-dev}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$repo/bin/images"
cacerts=/etc/ssl/certs/ca-certificates.crt
cd "$repo"

gobuild() { # gobuild OUT PKG
	CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w' -o "$1" "$2"
}

# context NAME: a fresh rootfs skeleton for image NAME with CA certs,
# /data and /tmp owned by the image user (65532).
context() {
	local ctx="$out/$1"
	mkdir -p "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/data" "$ctx/rootfs/tmp"
	if [[ -f "$cacerts" ]]; then
		cmp -s "$cacerts" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt" || cp "$cacerts" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
	fi
	chmod 1777 "$ctx/rootfs/tmp"
	chmod 0777 "$ctx/rootfs/data"
	echo "$ctx"
}

# install SRC DST copies only when the content changed (keeps mtimes and the
# docker layer cache stable).
install_file() { cmp -s "$1" "$2" || cp "$1" "$2"; }

# image NAME DOCKERFILE: build quarrylake/NAME:$TAG unless unchanged.
image() {
	local name="$1" dockerfile="$2" ctx="$out/$1" ref="quarrylake/$1:$TAG"
	cp "$dockerfile" "$ctx/Dockerfile"
	local sum
	sum="$(cd "$ctx" && { find . -printf '%M %p\n' | LC_ALL=C sort; find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-64)"
	local have
	have="$(docker image inspect -f '{{index .Config.Labels "quarry.context"}}' "$ref" 2>/dev/null || true)"
	if [[ "$have" == "$sum" ]]; then
		echo "$ref up to date"
		return
	fi
	echo "building $ref"
	# The legacy builder (Docker 20.10 without buildx) warns it is deprecated.
	docker build -q --label "quarry.context=$sum" -t "$ref" "$ctx" >/dev/null 2> >(grep -v -e DEPRECATED -e 'legacy builder' -e buildx -e '^ *$' >&2)
	echo "built $ref ($(docker image inspect -f '{{.Size}}' "$ref" | awk '{printf "%.1f MB", $1/1e6}'))"
}

build_quarry() {
	local ctx; ctx="$(context quarry)"
	gobuild "$out/quarry.bin" ./cmd/quarry
	install_file "$out/quarry.bin" "$ctx/rootfs/quarry"
	image quarry deploy/docker/quarry.Dockerfile
}

build_nats() {
	local ctx; ctx="$(context nats-server)"
	gobuild "$out/nats-server.bin" github.com/nats-io/nats-server/v2
	install_file "$out/nats-server.bin" "$ctx/rootfs/nats-server"
	image nats-server deploy/docker/nats.Dockerfile
}

build_minio() {
	local ctx; ctx="$(context minio)"
	# An empty directory at the top of MinIO's single drive is a bucket: the
	# image starts with the bucket "lake" so no client tool is needed.
	mkdir -p "$ctx/rootfs/data/lake"
	chmod 0777 "$ctx/rootfs/data/lake"
	./scripts/build-minio.sh
	install_file bin/tools/minio "$ctx/rootfs/minio"
	image minio deploy/docker/minio.Dockerfile
}

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(quarry nats minio)
start=$(date +%s)
for t in "${targets[@]}"; do
	case "$t" in
	quarry) build_quarry ;;
	nats | nats-server) build_nats ;;
	minio) build_minio ;;
	*) echo "unknown image $t (want quarry, nats, minio)" >&2; exit 2 ;;
	esac
done
echo "images ready in $(( $(date +%s) - start ))s"
