#!/usr/bin/env bash
# compacted-queries.sh: what a lake's small files cost each query, before
# and after compaction (docs/benchmarks.md, "Lake size: an import ends
# compacted, templates included"). Not part of make bench.
#
# 20,000 lines in frames of 100 (producer.frame_max_records), one mined
# batch a records file (encoder.max_batches: 1), each frame's lines one
# token longer than the last frame's, so that each frame brings new
# template versions and each flush a templates file: 200 records files and
# 200 templates files, as a long-running pipeline leaves a day that keeps
# finding templates. Lake A is that; lake B the same run with --compact;
# lake C the same lines without the growing tail (4 templates files).
# Each query runs ROUNDS x 10 times; the figure is the CPU (user + sys) of
# ten, from /usr/bin/time.
#   scripts/compacted-queries.sh [bin/quarry]
set -euo pipefail
bin=${1:-bin/quarry}
rounds=${ROUNDS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'producer:\n  frame_max_records: 100\nencoder:\n  max_batches: 1\n' >"$tmp/small.yaml"
gen() { # gen TAIL: TAIL=1 grows each frame's lines by a token
	awk -v tail="$1" 'BEGIN { srand(7); for (i = 0; i < 20000; i++) { b = int(i / 100)
		line = sprintf("2026-11-%02dT10:%02d:%02dZ job %d of worker w%d took %d ms", 1 + b % 28, int(i / 60) % 60, i % 60, i, i % 7, 1 + int(rand() * 999))
		if (tail) { for (k = 0; k < b % 100; k++) line = line " then"; for (k = 0; k < int(b / 100); k++) line = line " and" }
		print line } }'
}
gen 1 >"$tmp/grow.log"
gen 0 >"$tmp/flat.log"
"$bin" run --config "$tmp/small.yaml" --data "$tmp/A" --input "$tmp/grow.log" --tenant acme >/dev/null 2>&1
"$bin" run --config "$tmp/small.yaml" --data "$tmp/B" --input "$tmp/grow.log" --tenant acme --compact 2>&1 | grep 'compacted' >&2
"$bin" run --config "$tmp/small.yaml" --data "$tmp/C" --input "$tmp/flat.log" --tenant acme >/dev/null 2>&1
for d in A B C; do
	"$bin" query --lake "$tmp/$d/lake" --format raw | cmp - "$tmp/$([ $d = C ] && echo flat || echo grow).log"
	n() { find "$tmp/$d/lake/$1" -name '*.parquet' -not -path '*_delta_log*' | wc -l; }
	echo "lake $d: $(n records) records files, $(n templates) templates files on disk (B: before vacuum, 1 + 1 live)"
done
for r in $(seq "$rounds"); do
	for d in A B C; do
		for q in 'job 1234 ' '| count by template'; do
			/usr/bin/time -f "round $r lake $d '$q': %U + %S s CPU for 10" \
				bash -c "for i in \$(seq 10); do '$bin' query --lake '$tmp/$d/lake' --format raw '$q' >/dev/null; done"
		done
	done
done
