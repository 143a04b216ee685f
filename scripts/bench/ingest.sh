# Sourced by scripts/bench.sh. ingest_bench: the same generated lines
# through `quarry run` from a file and from each receiver (syslog TCP, OTLP
# HTTP, _bulk, JSON lines), as fast as it goes and paced at 80% of that:
# lines/s end to end, publish→ack and request p50/p99, CPU per line, peak
# RSS (cmd/quarry/ingest_bench_test.go). Writes $tmp/ingest.md.
# Issue 14's rate is a sustained one: at 300,000 lines a run is about a
# second, start-up and the last flush weigh on it; 2,000,000 lines (7-9 s
# at full speed) is the default.
#   BENCH_INGEST_LINES=2000000
ingest_bench() {
	local n=${BENCH_INGEST_LINES:-2000000}
	echo "== ingest: $n lines from a file and from each receiver" >&2
	QUARRY_BIN="$PWD/bin/quarry" QUARRY_INGEST_LINES="$n" QUARRY_INGEST_BENCH_OUT="$tmp/ingest-table.md" \
		go test -count=1 -timeout 60m -run '^TestIngestBench$' ./cmd/quarry/ >"$tmp/ingest.txt" 2>&1 ||
		{ cat "$tmp/ingest.txt" >&2; return 1; }
	cat "$tmp/ingest-table.md" >&2
	{
		echo "## Ingest: the file source and each receiver"
		echo
		echo "\`QUARRY_BIN=bin/quarry QUARRY_INGEST_LINES=$n QUARRY_INGEST_BENCH_OUT=<file> go test -run '^TestIngestBench\$' ./cmd/quarry/\`:"
		echo "$n generated lines (one tenant) through \`quarry run\` (its own process, embedded NATS with sync-always, two"
		echo "encoders, a local lake), from \`--input FILE\` and from each receiver of \`--follow\` (4 clients, 1000 lines a"
		echo "request or write), first as fast as it goes, then paced at 80% of that rate (\`--rate\` for the file, the"
		echo "client's schedule for the receivers). Lines/s runs from the first line sent to the committer's high-water"
		echo "covering every frame (for the file, the run's own elapsed, start-up included). Publish→ack is a frame's"
		echo "publish to its fsync'd JetStream ack (the run's summary); request is an HTTP request to its answer, which"
		echo "comes once its lines are durable (syslog has no answer). CPU is the process's user+sys per line; client CPU"
		echo "is the bench's own clients' (sending the requests, whose bodies are built before the clock starts)."
		echo
		cat "$tmp/ingest-table.md"
	} >"$tmp/ingest.md"
}
