#!/usr/bin/env bash
# abba.sh compares the CPU of two quarry binaries on one query, in rounds
# of A, B, B, A (so drift of a busy machine falls on both alike), and
# prints the median of each round's ratio B/A of pair sums, with every
# round's ratio. CPU is perf stat's task-clock of the query and its shell.
#
#   scripts/abba.sh OLD_BIN NEW_BIN ROUNDS LAKE [QUERY]
#
# QUERY is one query argument ('' or none: a full render). Output goes to
# /dev/null. docs/benchmarks.md's paired ratios were taken with it.
set -euo pipefail
if [ $# -lt 4 ]; then
	echo "usage: $0 OLD_BIN NEW_BIN ROUNDS LAKE [QUERY]" >&2
	exit 2
fi
command -v perf >/dev/null || { echo "$0: perf is needed (Debian: linux-perf)" >&2; exit 2; }
a=$1 b=$2 rounds=$3 lake=$4 q=${5:-}
cpu() { # cpu BIN: milliseconds of CPU of one query
	BIN=$1 LAKE=$lake Q=$q perf stat -x, -e task-clock \
		sh -c '"$BIN" query --lake "$LAKE" --format raw "$Q" >/dev/null' 2>&1 |
		awk -F, '/task-clock/ {print $1}'
}
ratios=()
for _ in $(seq "$rounds"); do
	a1=$(cpu "$a") b1=$(cpu "$b") b2=$(cpu "$b") a2=$(cpu "$a")
	ratios+=("$(awk -v a1="$a1" -v a2="$a2" -v b1="$b1" -v b2="$b2" 'BEGIN {printf "%.3f", (b1+b2)/(a1+a2)}')")
done
median=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{r[NR]=$1} END {print r[int((NR+1)/2)]}')
echo "B/A median $median over $rounds rounds: ${ratios[*]}"
