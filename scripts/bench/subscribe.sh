#!/usr/bin/env bash
# The subscriber latency section of docs/benchmarks.md: publish-ack to
# delivery by a subscriber (package subscribe) at 80% of the pipeline's
# throughput, measured in the same run (BenchmarkAckToDelivery).
#
# scripts/bench.sh sources this file and calls `subscribe_bench FILE` after
# it wrote FILE; run on its own (scripts/bench/subscribe.sh), it replaces
# the section in docs/benchmarks.md (or $BENCH_OUT) in place.
# QUARRY_BENCH_SUB_LINES and QUARRY_BENCH_SUB_SECONDS size the run.

# subscribe_bench FILE: runs the benchmark and puts its section in FILE,
# replacing the section when FILE has one, else appending it.
subscribe_bench() {
	local out=$1 dir
	dir=$(mktemp -d)
	echo "== subscriber: publish-ack to delivery at 80% of the pipeline's throughput" >&2
	local cmd="go test -run '^\$' -bench AckToDelivery -benchtime 1x ./subscribe/"
	# At 80% (the figure asked for), then at 10% for 20 s: the floor, where
	# the pipeline surely keeps pace.
	local f
	for f in 0.8 0.1; do
		local secs=${QUARRY_BENCH_SUB_SECONDS:-30}
		[ "$f" = 0.1 ] && secs=20
		if ! QUARRY_BENCH_SUB_FRACTION=$f QUARRY_BENCH_SUB_SECONDS=$secs go test -run '^$' -bench AckToDelivery -benchtime 1x ./subscribe/ >"$dir/sub-$f.txt" 2>&1; then
			cat "$dir/sub-$f.txt" >&2
			rm -rf "$dir"
			return 1
		fi
		grep -E '^(ack to delivery|BenchmarkAckToDelivery)' "$dir/sub-$f.txt" >&2
	done
	# row FRACTION: the table row of that run
	row() {
		local line
		line=$(grep -E '^BenchmarkAckToDelivery' "$dir/sub-$1.txt" | head -1)
		m() { echo "$line" | awk -v u="$1" -v f="${2:-%.0f}" '{for (i = 2; i <= NF; i++) if ($i == u) printf f, $(i-1)}'; }
		local hp50
		hp50=$(m held-p50-ms)
		echo "| $(awk -v f="$1" 'BEGIN {print f * 100}')% | $(m lines/s) lines/s | $(m paced-lines/s) lines/s | $(m delivered-lines/s) lines/s | $(m commits) | $(m p50-ms) ms | $(m p99-ms) ms | $(m max-ms) ms | $(m ack-report-p50-ms) ms | $(m report-commit-p50-ms) ms | $(m commit-delivery-p50-ms) ms | $(m held-% %.1f)% | ${hp50:-–}${hp50:+ ms} |"
	}
	{
		echo "## Subscriber: publish-ack to delivery at 80% of the pipeline's throughput"
		echo
		echo "\`$cmd\` (scripts/bench/subscribe.sh), run on $(date -u +%Y-%m-%d): the pipeline in one process"
		echo "(embedded NATS with sync-always, miner, two encoders, committer, local lake; the stages' defaults of"
		echo "\`quarry run\`: encoder \`max_age\` 1s, committer \`commit_interval\` 500ms) and a subscriber following"
		echo "commit notices from \"now\". First ${QUARRY_BENCH_SUB_LINES:-1000000} generated lines go in as fast as the producer"
		echo "goes (every stage runs from a backlog); the pipeline's throughput is those lines over the time from the"
		echo "start to their last delivery (a slight underestimate: it includes the last lines' latency). Then the"
		echo "producer is paced (\`producer.rate\`) at 80% of that rate for"
		echo "${QUARRY_BENCH_SUB_SECONDS:-30} s; each line's latency runs from the moment its frame's ack reached the producer to its"
		echo "delivery by \`Next\`. The split: to the time the encoder's report covering the line is stored in"
		echo "QUARRY_REPORTS (miner, encoder buffering and upload), to the commit's \`commitInfo.timestamp\`"
		echo "(committer) of the commit that released the line, and to delivery (both table commits, the notice, the"
		echo "subscriber's read). A line is released by the first commit whose high-water covers it (docs/subscribers.md):"
		echo "held is the share of lines whose file was committed above the high-water (the two encoders reported out of"
		echo "WAL order), released by a later commit; held p50 is the time between the two commits, part of report→commit."
		echo
		echo "A second run paces at 10% for 20 s (\`QUARRY_BENCH_SUB_FRACTION=0.1 QUARRY_BENCH_SUB_SECONDS=20\`): the floor,"
		echo "where the pipeline keeps pace whatever else the machine runs. Each run measures its own throughput."
		echo
		echo "| paced at | throughput | paced | delivered | commits | p50 | p99 | max | ack→report p50 | report→commit p50 | commit→delivery p50 | held | held p50 |"
		echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		row 0.8
		row 0.1
		echo
		echo '```'
		cat "$dir"/sub-0.8.txt "$dir"/sub-0.1.txt | grep -E '^(ack to delivery|BenchmarkAckToDelivery)'
		echo '```'
		echo
		echo "Reading it: while the pipeline keeps pace (delivered ≈ paced; it trails by the last lines' latency), the latency is set by the stages'"
		echo "intervals, not by their work: a batch waits in its encoder until the buffer's oldest batch is \`max_age\`"
		echo "old (or the file reaches its target size; the flush check runs every \`max_age\`/4), and the committer"
		echo "commits at most once per \`commit_interval\`: a report that arrives while a commit is due is committed"
		echo "at once, one that arrives within the interval when it ends. Commit→delivery holds"
		echo "the notice path and the subscriber's reading of the commit's lines in order, so it grows with the lines"
		echo "per commit. When delivered is below paced, the pipeline fell behind its input on this shared machine"
		echo "and the latency is that of the backlog. The two encoders take WAL batches in turn and flush on their own"
		echo "clocks, so the file one of them commits usually holds batches above the high-water until the other"
		echo "flushes the batches between: those lines (held) wait for that later commit, up to about one \`max_age\`,"
		echo "so that each tenant's lines arrive in WAL order. With one encoder worker (one encoder, \`workers: 1\`) reports follow the WAL and normally nothing is held."
	} >"$dir/section.md"
	awk -v f="$dir/section.md" '
		/^## Subscriber: / {skip = 1; while ((getline l < f) > 0) print l; done = 1; next}
		skip && /^## / {skip = 0; print ""}
		!skip {print}
		END {if (!done) {print ""; while ((getline l < f) > 0) print l}}
	' "$out" >"$dir/out.md"
	mv "$dir/out.md" "$out"
	rm -rf "$dir"
	echo "wrote the subscriber section of $out" >&2
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	cd "$(dirname "$0")/../.."
	subscribe_bench "${BENCH_OUT:-docs/benchmarks.md}"
fi
