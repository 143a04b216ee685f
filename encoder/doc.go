// Package encoder is quarry's Parquet stage: workers pull mined batches
// (mined/2; mined/1 is still read) from the work queue streams.MinedStream
// through the one durable consumer streams.EncoderConsumer, write them as
// zstd Parquet files (records v3 through internal/recfile, templates as
// lake.TemplateRow) into the lake's object store, and report each flush
// (report/1) to the committer.
//
// # Flow
//
// Any number of workers, in one process (Config.Workers) or many, share the
// consumer. A worker decodes each batch and buffers its records grouped by
// partition and its template definitions. The partition is the tenant in a
// records table of lake.CurrentLayout (one file per tenant per flush, each
// row with its date column), and (tenant, lake.Date(ts)) in a table created
// before it (lake.DatedLayout); the worker reads the layout from the
// table's Delta log at start, and at its flushes until the table exists. It flushes
// when the buffered input reaches Config.TargetFileBytes or
// Config.MaxBatches, when the oldest buffered batch is Config.MaxAge old,
// when it holds at least Config.IdleFlushBytes and no batch came for
// Config.IdleFlush (the input paused: a drained backlog is encoded at once),
// or when the process drains. A flush writes one records file per partition
// (at zstd's default level; at its best level when the flush is by age or
// the drain with less than Config.HighCompressionBelow buffered and the
// process used less than half a core meanwhile without waiting for a CPU
// half as long as it ran: the CPU is idle, not taken by other work) and at
// most one templates file (the partitions' files are encoded at once, up to
// GOMAXPROCS at a time in the process, one fewer while quarry run's line
// source runs: ReserveEncodeSlot), uploads them with objstore.Store.Put under
//
//	records/tenant=<t>/part-<first>-<last>-<writer>-<flush>.zstd.parquet
//	records/tenant=<t>/date=<d>/part-...  (lake.DatedLayout)
//	templates/part-<first>-<last>-<writer>-<flush>.zstd.parquet
//
// (first and last are the lowest and highest WAL sequence in the file) and
// publishes a streams.Report on streams.ReportSubject(writer) with
// Nats-Msg-Id = the report id <writer>.<flush>. The report lists every batch
// of the flush, empty ones included, so the committer's chain never stalls.
//
// A report is never larger than the connection's max payload: a flush
// whose report would be is split (its files deleted, its batches flushed
// again as two flushes below and from the median WAL sequence, each with
// files of its own batches only), so each part is an ordinary report over
// disjoint batches. One batch whose report is too large goes without file
// stats, or, if still too large, is nak'ed with the reason in Ready.
//
// # Template texts
//
// A records v3 file needs the text of every template version its rows use;
// a batch carries a definition only when its mining created the version.
// The encoder keeps the texts of every definition it receives (per tenant,
// shared by its workers) and, on a miss (the defining batch went to another
// worker or encoder, or this one restarted), reads the tenant's events on
// streams.TemplateStream, which keeps every definition. It retries for up
// to Config.TemplateWait (the event may still be on its way), keeping the
// batches in progress and saying so in Ready; after that it writes the
// partition as a records v2 file, which needs no text, and logs an error.
// A (template id, version) has one text forever, so a cached text is never
// wrong and a second encoder or a restart writes the same rows.
//
// # Delivery contract
//
// A batch is acked only after the committer's verdict (KV
// streams.VerdictsBucket, key streams.VerdictKey(report id)) accepted a
// report that covers it, or rejected a report and named the batch a
// duplicate (another report owns it). Until then the worker keeps it in
// progress (InProgress every AckWait/3), for as long as the verdict takes:
// the verdict is a pure function of the report stream, so it will come once
// a committer runs; a report waiting longer than Config.VerdictTimeout is
// logged as an error and shown by Ready. Acks are confirmed (DoubleAck).
// A rejected report's files are deleted and its other batches nak'ed: they
// are redelivered and re-encoded into a new report.
//
// The only batches acked without a verdict are those that do not decode:
// they are dead-lettered (stage "encoder", with the reason) first, then
// acked; if the dead letter cannot be written the batch is nak'ed.
//
// Idempotence: a writer id is the instance (Config.Name plus a random run
// token) plus the worker index, and file names add the flush number, so no
// two flushes anywhere ever write the same name, while a retried upload of
// one flush overwrites its own file. Report ids are unique the same way, so
// a retried publish is de-duplicated by JetStream and a verdict is never
// confused with another run's. A batch the work queue holds twice (a miner
// replay beyond the duplicate window) is encoded once per worker and every
// copy is settled with it; across workers the committer rejects the later
// report and the encoder acks the duplicate.
//
// # Crashes
//
//   - Before upload: nothing was written; the unacked batches are redelivered
//     to another worker after AckWait.
//   - After upload, before the report: the files are orphans, never
//     referenced by any Delta commit; `quarry vacuum` removes them. The
//     batches are redelivered after AckWait.
//   - After the report, before the verdict: the committer still judges the
//     report. Accepted: its files are committed, and the redelivered batches
//     are re-encoded into a report that is rejected as duplicate, whose
//     encoder deletes its files and acks them. Rejected: the files are
//     orphans (vacuum) and the batches are redelivered.
//   - After the verdict, before the acks: as above; the redelivered batches
//     end in a rejected report and are acked as duplicates.
//
// Shutdown (ctx cancel or Shutdown) stops fetching, flushes what is
// buffered, waits for the verdicts up to Config.DrainTimeout and naks
// whatever is still held, so it is redelivered at once; files of reports
// still waiting for their verdict stay (accepted later, or vacuumed).
// Files of a flush cut short before its report was published are deleted.
//
// docs/architecture.md tells the whole pipeline's story, docs/formats.md
// the formats.
package encoder
