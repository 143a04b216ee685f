// Package miner is quarry's WAL consumer stage: it reads QUARRY_WAL in
// sequence order with one ordered consumer, mines every record into a
// template (internal/mining, one tree per tenant, one cluster-wide template
// id counter) and publishes one mined batch (mined/3) per WAL message to the
// work queue QUARRY_MINED, plus a template event (template/1) per template
// birth or widening to QUARRY_TEMPLATES. A record's ts and ts source (event,
// previous line's or read time) pass through unchanged; a created or changed
// template carries the kind of each parameter (the engine's mask names).
//
// # Delivery contract
//
// Position. An ordered consumer keeps no position, so the miner keeps it in
// its snapshots: the object store quarry_snapshots holds blobs named
// streams.SnapshotName(seq) ("miner-" and the zero-padded sequence) (the mining model, the WAL sequence S it covers, the PrevSeq chain
// value and the counters). On start the newest snapshot that decodes is
// restored (a corrupt one is skipped with a warning and the next older one
// tried) and the WAL is read from S+1; without a snapshot from sequence 1.
// KV quarry_positions key "miner" holds the last WAL sequence whose batch,
// and every batch before it, JetStream acked (informational: lag and
// metrics); key "miner.snapshot" the sequence of the newest snapshot, which
// is the lowest WAL sequence a restart needs (the WAL must not be purged
// above it).
//
// Ids. Mining runs on one goroutine in WAL order, and the model is a pure
// function of the lines it has seen, so template ids, versions and
// parameters depend only on the WAL: restoring the snapshot at S and
// replaying S+1.. gives exactly the batches an uninterrupted run gives,
// byte for byte.
//
// Acks and idempotence. The miner never acks the WAL (the ordered consumer
// does not need it; the WAL is purged by the committer). A batch is published
// with Nats-Msg-Id "wal-<seq>", a template event with "tpl-<id>-<version>";
// publishes are asynchronous with at most MaxInFlight WAL messages in flight
// and every failed or unacked publish is retried with backoff and the same
// id until JetStream acks it: a full or unavailable work queue stalls the
// miner, it never skips a batch. A snapshot at S is written only after every
// batch up to S was acked, so a snapshot never runs ahead of the work queue.
//
// Bad input. A WAL message that does not decode as a frame (frame/2, or
// frame/1 written by an older producer) is sent to
// QUARRY_DLQ (quarry.dlq.miner, reason in Quarry-Reason) and still yields an
// empty batch with Quarantined = 1, so the committer's PrevSeq chain goes on.
// A record whose attributes are not valid UTF-8 (the lake's attrs map
// requires it) is dead-lettered alone, as a one-record frame/2 with
// the frame's source, tenant and offsets, and counted in the batch's
// Quarantined. Over-long lines are not bad input: the engine assigns them
// losslessly to the tenant's "<*>" template. A batch larger than the work
// queue's max message size stops the miner with ErrBatchTooLarge (nothing is
// lost: the WAL keeps the frame; raise streams.max_msg_size or lower the
// producer's frame size).
//
// Crash at each step:
//   - after dead-lettering, before publishing the batch: the replay
//     dead-letters again with the same Nats-Msg-Id (de-duplicated inside the
//     window) and publishes the batch;
//   - after publishing batches, before their acks or before a snapshot
//     covers them: the replay republishes identical batches and events with
//     the same ids; JetStream drops them inside the duplicate window, the
//     committer (first report owns a batch) beyond it;
//   - while writing a snapshot: the object is incomplete or absent and the
//     older snapshot is restored; a snapshot that fails to decode is skipped;
//   - after a snapshot, before the KV position update: the position is
//     informational and catches up with the next acks.
//
// On context cancellation Run stops reading the WAL, waits (at most
// DrainTimeout) for the in-flight publishes to be acked, writes a final
// snapshot (within another DrainTimeout) and the KV position, and returns
// nil. Publishes still unacked at the deadline are abandoned: no final
// snapshot then, the restart replays them with the same ids.
//
// docs/architecture.md tells the whole pipeline's story and docs/formats.md
// the message formats (frame/2, mined/3, template/1) and the snapshot names;
// the snapshot blob's layout is on encodeSnapshot.
package miner
