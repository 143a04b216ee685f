// Package committer is quarry's single writer of the lake: it judges the
// encoders' reports (report/1) in the order of streams.ReportStream, writes
// a verdict (verdict/1) for each into KV streams.VerdictsBucket, and commits
// accepted files to the Delta tables <lake>/templates and <lake>/records as
// the drain barrier allows.
//
// # Lease
//
// Any number of committers run; one is active. The lease is the key
// streams.KeyLease in KV streams.StateBucket, JSON {holder, expires_at}. A
// committer takes it with a create (absent key) or with an update at the
// revision it read once it lapsed: expires_at passed, or the same revision
// was watched for a whole LeaseTTL (which does not depend on clocks). The
// holder renews every LeaseTTL/3 by an update at its last revision; losing
// that race, or not renewing within LeaseTTL minus a tenth, ends its term at
// once and it goes back to standby. A committer stopped by its context
// deletes the lease (at its revision) so a standby takes over within a poll
// (LeaseTTL/5); a crashed one is replaced within about LeaseTTL plus a poll.
//
// The lease is only an optimisation: the fence is the Delta log. Every log
// entry is written create-only (delta.Table.Commit: If-None-Match on S3,
// exclusive create on a folder), so a committer that lost its lease without
// noticing cannot write a version another one wrote; it gets
// delta.ErrVersionExists and stands down.
//
// # Arbitration
//
// On becoming active the committer creates the tables if absent and
// rebuilds its state from the Delta log: the high-water W is the records
// table's txn version for app id "quarry" (AppID), and every committed add
// carries the tags "quarry.report" (report id) and "quarry.seqs" (every
// batch seq of that report, as ranges "5-9,12"), giving the committed
// reports and the committed seqs above W. It then replays the report stream
// from its first message with an ordered consumer (the durable
// streams.CommitterConsumer is not used) and follows it. For each report, in
// stream order:
//
//   - a report id decided earlier (this term, or a verdict in KV) keeps that
//     verdict: a republished report, or a replay after takeover, never gets
//     a different answer;
//   - otherwise it is rejected when any of its batches is at or below W, or
//     is owned by an earlier accepted report (those seqs are
//     Verdict.Duplicates), or when it is inconsistent (a batch or file listed
//     twice, an unclean path, a records file without tenant/date, a path an
//     accepted report owns);
//   - otherwise every file is Stat-checked in the store: a missing file or a
//     size other than the reported one rejects it (no duplicates: the
//     encoder naks and re-encodes); transient store errors are retried, never
//     turned into a verdict;
//   - otherwise it is accepted and owns its batches.
//
// The verdict is stored create-only (KV Create) before the next report is
// judged. The Stat makes a verdict depend on storage, so it is decided once:
// a stored verdict is always reused, and when two committers race on one
// report (a fenced one still running) the first stored verdict wins and the
// other adopts it. Reports are judged strictly in order, so every stored
// verdict's predecessors are stored too, and a committer that takes over
// reaches the same state. A stored "accepted" that conflicts with the state
// (possible only after verdicts expired, see streams.Config.VerdictTTL)
// keeps its verdict but is kept out of the lake and dead-lettered. A report
// whose id is in the Delta log is accepted even after its verdict expired.
// Reports that do not decode are dead-lettered (stage "committer") and, when
// they carry an id, rejected with the reason.
//
// # Drain barrier and commits
//
// Accepted batches form a chain by BatchRef.Prev. W advances to W' along
// the chain from W (gaps in WAL sequences are fine; a missing batch stops
// it). An advance, at most once per CommitInterval (and at once when the
// replay catches up), writes one commit to templates, then one to records,
// each version = the table's version + 1, holding every accepted file the
// table lacks (checked by path, so no file is added twice), a commitInfo
// (operation WRITE, quarry {high_water, reports, committer,
// lease_revision}) and txn(quarry, W'). Accepted reports whose batches lie
// beyond W' are committed too (their seqs are then committed above W,
// recorded by the tags). After the records commit the high-water is written
// to streams.KeyHighWater (only upwards), then the streams are purged
// (both on by default): the WAL below min(W', oldest retained miner snapshot)+1 (PurgeWAL; the
// miner may fall back to any retained snapshot when a newer one is corrupt), the
// report stream's prefix of reports at or below W' (PurgeReports; later
// reports and all verdicts stay, so a rebuild reaches the same state).
//
// No report waits for a fetch to end: the replay takes what the stream
// holds without waiting (an empty fetch means it caught up); after it,
// while an advance is due (CommitInterval passed since the last one) the
// term blocks for the first report only and then takes, without waiting,
// up to FetchBatch reports already there, so a report arriving at an idle
// committer is judged and committed at once; within an interval it
// fetches up to FetchBatch reports until the interval ends, and no
// longer, so reports are batched under load and committed when the
// interval ends. Except at the end of a burst: within an interval, when an
// advance is waiting and no report came for CommitInterval/10 (5ms to
// 100ms), the committer reads the WAL stream's last sequence, and if the
// advance covers it (every line written so far is in an accepted file: no
// report can come before more lines do) commits at once. Under load the
// WAL is always ahead of the advance, so this adds no commit there; it
// takes up to CommitInterval off the time the last lines of a burst wait.
//
// # Progress
//
// Producers publish progress facts (streams.Progress, KV
// streams.ProgressBucket) after JetStream acked the frames they speak for.
// The committer reads them (at most once per CommitInterval), then the WAL
// stream's last sequence L: every such frame is at or below L, so the fact
// counts once the high-water reaches L. Each commit's commitInfo carries
// quarry.progress (per source, finalized_until and that sequence), and the
// table lake.ProgressTable is overwritten with one row per source when a
// value moved, at most once per ProgressInterval, after the records commit
// (progress.go). A failed progress write never holds up the high-water; it
// shows in Ready after StallAfter. So do checkpoints, log cleanup, commit
// notices and the maintenance pass failing twice or more in a row for StallAfter (stall.go).
//
// # Delivery contract and crashes
//
// The committer acks nothing: encoders ack their batches on the verdict.
// An accepted verdict promises the batches will be committed: the files are
// uploaded and the report is in the stream, so any committer re-derives it.
// What a crash (or lost lease) at each step leaves behind:
//
//   - after judging, before storing the verdict: nothing; the report is
//     judged again by the next term (same rule, same state);
//   - after storing the verdict: the verdict stands and is reused;
//   - during the templates commit: the version exists or not (create-only);
//     either way the records table still has W, and the next term commits
//     what the tables lack;
//   - between the templates and the records commit: templates' txn is ahead
//     of records'; the next term replays to the same W' and commits to
//     templates only files it lacks (nothing, unless more arrived) and to
//     records the rest;
//   - after the records commit, before the high-water key: the key lags;
//     the Delta log is the truth and the next advance fixes the key;
//   - after the records commit, before its commit notice or the templates
//     commit's (notice.go, streams.NoticeStream): the next advance, or else
//     the next term, publishes every notice of each table missing after
//     its last one in the stream, in version order, records first, with
//     Nats-Msg-Id "records-<version>" and "templates-<version>";
//   - after the records commit, before the progress table commit: the
//     progress table lags commitInfo; the next term reads the facts again
//     and catches up (an uploaded, uncommitted progress file is left for
//     vacuum);
//   - compaction, after writing its new files and before the commit: the
//     files are orphans (vacuum's), the old files still referenced; after
//     the commit: the new files referenced, the old ones removed. One
//     commit, so never both and never neither;
//   - retention: the expired partitions are removed in one commit or not.
//
// # Compaction and retention
//
// A background worker of the active term (maintain.go) plans retention
// (retention.go) and compaction (compact.go) from a snapshot, writes a
// compaction's new files, and hands each commit to the term goroutine,
// which commits it between two advances (its version counter, its lease,
// create-only) after checking that every file it removes is still live.
// These commits carry remove and add actions (compaction: dataChange=false;
// retention: removes with dataChange=true) and no txn, so the high-water
// is unchanged. A compacted file's "quarry.reports" tag lists the reports
// of the files it replaced; a rebuild marks them committed. The pass also
// merges the templates table's small files once that table is idle (no
// new file for Idle) or holds 16 of them, the same kind of commit to that
// table; their reports
// are committed in records already. Compact runs a
// pass by hand under the lease (quarry compact); Maintain asks the active
// term for a pass at once, the same jobs through the same term goroutine
// (quarry run --compact, with MaintainOptions.AllClosed), one pass at a
// time with the background's; a committer without a term answers
// ErrNotActive.
//
// # Bounds
//
// What the committer keeps does not grow with the number of commits: the
// report stream and the WAL are purged below what is committed (purge.go),
// verdicts expire after streams.Config.VerdictTTL, its memory of committed
// reports ends at the report stream's purge point, and each table's log is
// checkpointed every checkpoint interval and cleaned up to the log
// retention after each checkpoint, checkpoints leaving out tombstones past
// the tombstone retention (checkpoint.go). TestNATSStateBoundedOverAWeek and
// TestDeltaLogBoundedOverAWeek check these over many commits without a
// clock (make bounds: a week, 604,800 commits); docs/architecture.md lists
// every bound. Every retry either ends or shows in Ready (stall.go).
//
// # Table properties
//
// The checkpoint interval, log retention and tombstone retention of a
// table come from the configuration when set there, else from the table's
// delta.checkpointInterval, delta.logRetentionDuration and
// delta.deletedFileRetentionDuration, else from the defaults; tables the
// committer creates carry the values it uses (tableprops.go).
//
// The code follows these steps by file: committer.go (the standby/lease
// loop and retries), lease.go, term.go (one active term: rebuild, replay,
// follow), report.go (judging a report, verdicts, dead letters), arbiter.go
// (the rules), commit.go (an advance: both Delta commits and the high-water
// key), notice.go (commit notices), progress.go, purge.go, checkpoint.go, tableprops.go and stall.go, maintain.go, compact.go, retention.go. docs/architecture.md tells the whole pipeline's story.
package committer
