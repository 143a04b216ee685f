// Package cdc streams SQL Server change data capture into the WAL
// (streams.WALStream): one Stream per capture instance, a Set of them per
// database (`quarry producer mssql`, Run). Frames go out through the
// producer's frame Publisher; the WAL floor that keeps the committer's
// purge off frames a restart needs is the producer's one implementation
// (producer/internal/walfloor). docs/architecture.md tells the long story
// ("Delivery contract, stage by stage", "Crash matrix").
//
// Delivery contract of a stream (one per capture instance):
//
//   - It reads the change table cdc.<ci>_CT in (start LSN, command id,
//     seqval, operation) order, in pages of at most PageSize rows, up to
//     sys.fn_cdc_get_max_lsn(), and publishes frames on
//     streams.CDCSubject(database, ci). A frame's records are consecutive
//     changes; FirstOffset/NextOffset count the records this capture
//     instance has published (snapshot included), so frames chain.
//   - Nats-Msg-Id is "cdc.<db>.<ci>:<first change position>/<last change
//     position>" (snapshot frames: "cdc.<db>.<ci>:snap:<lsn>:<hash of the
//     first and last key>"): the same changes cut into the same frame get
//     the same id, and JetStream drops the copy inside its window.
//   - The position (KV quarry_positions "cdc.<db>.<ci>", JSON: the key of
//     the last change consumed, or "through LSN" when caught up, record and
//     frame counts, the WAL sequence of the last acked frame, snapshot
//     progress) is saved only after JetStream acked every frame before it.
//   - Crash after a publish and before the position save: on restart the
//     stream first reads its own subject in the WAL after the saved WAL
//     sequence; frames that continue the saved record count are already
//     written and the position moves past them. So a restart republishes
//     nothing, even for a frame cut differently the second time (a frame
//     at the head of the log ends where the max LSN was). Where the WAL
//     was purged in between, it relies on the message ids.
//   - Caught up, the stream saves "through the max LSN" and publishes a
//     progress fact (streams.Progress, KV quarry_progress and
//     quarry.progress.cdc.<db>.<ci>) whose FinalizedUntil is just before
//     the commit time of that LSN: every change committed earlier is in the
//     WAL. A quiet table's progress advances with the max LSN.
//   - Purged range: a saved position below sys.fn_cdc_get_min_lsn(ci) (the
//     cleanup job removed changes the stream has not read), found before or
//     after any page, stops the stream with ErrPurgedRange, unless its
//     bootstrap mode is when_needed: then it snapshots again.
//   - Schema change: when a newer capture instance of the same table
//     exists, the stream reads the old one up to the new one's start LSN,
//     then continues in the new one (its own subject and position key),
//     marking the old position with the successor so a restart follows.
//   - Transient errors (SQL, NATS) rewind the stream to the last acked
//     position and retry with backoff; Ready reports the error meanwhile.
//   - A record larger than FrameBytes is dead-lettered (stage "producer",
//     Quarry-Source "cdc.<db>.<ci>", Quarry-Offset its position) and
//     skipped.
//   - Bootstrap (no saved position, or a purged one with when_needed): a
//     snapshot of the table through one sqlserver.Snapshot, by default one
//     transaction at SNAPSHOT isolation whose first statement reads the
//     max LSN L, so the image is the table as of L; it is read in key
//     order in chunks of SnapshotChunk rows (keyset pagination inside the
//     transaction), published as records with operation "snapshot", then
//     the stream continues with the changes after L. Every change at or
//     before L is in the image, every change after it comes as a change;
//     only a transaction committed before the snapshot began but not yet
//     harvested by the capture job (its lag) is in both. A snapshot
//     transaction cannot be resumed: a restart (or a SQL error) in the
//     middle of a snapshot starts a new one at a new L, after the records
//     already published (they stay in the WAL, tagged with the old _lsn).
//     With SnapshotIsolation read_committed each chunk is its own query and
//     a restart resumes after the last acked key at the old L.
//
// When it acks and what makes it idempotent: a frame counts only once
// JetStream acked it, in publish order; the saved position never runs ahead
// of the acks. A republished frame carries the same Nats-Msg-Id, and a
// restart first skips the frames it finds in the WAL beyond its saved state.
//
// Crash at each step: before a publish, nothing is written and the restart
// reads again from the saved position. After a publish and before its ack,
// or after the ack and before the position save, the frame is in the WAL
// beyond the saved position: the WAL floor (floor.cdc.<db>.<ci>, put before
// the first frame and released once the saved state covers every frame)
// keeps it from the purge, and the restart finds it and moves past it. A
// crash in the middle of a snapshot at SNAPSHOT isolation starts a new
// snapshot after the records already published. After the position save,
// nothing is repeated. A restart after the WAL was purged past its floor
// (a stop longer than the committer's floor_max_age) cannot verify: it
// warns, counts quarry_producer_cdc_unverified_restarts_total and relies on
// the message ids.
//
// Readiness: (*Set).Ready, registered by Run, is not ready while any capture
// instance is starting, retrying after an error or stopped.
package cdc
