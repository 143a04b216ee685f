// Package producer turns lines into frames in the WAL (streams.WALStream):
// line sources (a file, stdin, the core NATS subject IngestSubject(tenant),
// a generator), and the frame Publisher they and the SQL Server CDC streams
// (package producer/cdc) publish through. A source's WAL floor, which keeps
// the committer's purge off frames a restart must read back, is the one
// implementation in producer/internal/walfloor. docs/architecture.md tells
// the long story ("Delivery contract, stage by stage", "Crash matrix").
//
// Delivery contract of the line sources (NewFile, NewReader, NewSubject,
// NewGenerate, and NewPush, which the network receivers of
// producer/ingest feed; their records also carry attributes and, when the
// protocol has one, the event time):
//
//   - Lines are split at '\n' and kept byte for byte otherwise ('\r',
//     invalid UTF-8, empty lines). They are batched into frames by bytes
//     (FrameMaxBytes), count (FrameMaxRecords) and linger time (Linger after
//     a frame's first line); a frame whose last line ends a request (a push
//     batch, an ingest message) is cut, when nothing more is read behind
//     it, at once if none of the source's frames is in flight, else as soon
//     as those are resolved, taking the requests that arrived meanwhile
//     (group commit: its client waits for the ack, and a frame per request
//     costs the pipeline per-message work). A frame's offsets are source positions: byte
//     offsets for a file, stdin and the generator, a line counter for the
//     NATS subject. Frames of a source are contiguous: each starts where the
//     previous one ended. Its Nats-Msg-Id is streams.FrameMsgID(source,
//     FirstOffset), and every frame carries its NextOffset in the
//     HeaderNextOffset header.
//   - Each record's TS is the line's event time (Config.EventTime, keys
//     timestamp and timezone): the timestamp the line starts with, else the
//     previous line's event time in this source run (a continuation line),
//     else the read time (when the read that completed the line returned:
//     one time for the lines of one read); TSSource says which. The text is
//     not changed. The
//     progress fact's FinalizedUntil is the read time of the last acked
//     line, never an event time, which may come out of order.
//   - A frame is written only when JetStream acked it. Frames go out
//     asynchronously with at most PublisherConfig.MaxInFlight unacked; the
//     acks are processed in publish order.
//   - The position, KV quarry_positions key PositionKey(source) =
//     "producer.<source>", is the NextOffset of the last frame acked after
//     every earlier frame was acked, saved after the ack (coalesced). It
//     never runs ahead of the acks; a frame that fails after its retries
//     stops the source and the position stays before it.
//   - Restart: frames beyond the saved position may already be in the WAL
//     (a crash between ack and save, or frames acked after an earlier one
//     was lost), and the restarted source may cut its frames elsewhere (the
//     linger timer makes cuts timing-dependent), so ids alone would not
//     de-duplicate them. A restarting source therefore scans the headers of
//     the WAL messages on its subject stored since shortly before its
//     position was saved (15 minutes back without a position) for its own
//     frames, skips the offset ranges they cover and cuts its frames at
//     their boundaries: no line is written twice, none is lost. The NATS
//     subject source instead continues its counter after the highest offset
//     found, so its ids never repeat.
//   - A line longer than Config.MaxRecordBytes is dead-lettered (stage
//     "producer", headers Quarry-Source and Quarry-Offset, a deterministic
//     Nats-Msg-Id, payload its first 64 KiB, the reason states its length)
//     before any later frame is published; the position passes it with the
//     next frame or at the end.
//
// Crash at each step: before a publish, nothing is written and the source
// re-reads from the saved position; after a publish and before its ack, or
// after the ack and before the position save, the restart finds the frame
// in the WAL (or JetStream de-duplicates the republished id) and skips its
// lines; after the save, nothing is repeated.
//
// Per source kind: a file resumes at its position (see NewFile for follow
// mode, truncation and rotation). Stdin does not resume: its offsets count
// from the start of the run and its source id carries a run id. The
// generator's streams are deterministic, so it resumes like a file. A
// plain publish on the NATS ingest subject is at most once up to the source
// (core NATS cannot replay): lines received but not yet acked when the
// process dies are lost. A request on it is answered only once its lines
// are durable, so a requester that retries until answered gets at least
// once (see NewSubject). A push source (NewPush) behaves like the NATS
// subject: each Submit is a request, answered once its lines are durable.
package producer
