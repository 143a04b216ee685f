package encoder

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/cputime"
	"github.com/quarrylake/quarry/internal/crashpoint"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/streams"
)

// held is one mined batch a worker holds unacked. Msgs has more than one
// message when the work queue holds the same WAL sequence twice (a miner
// replay beyond the duplicate window, or a redelivery after a stall): the
// batch is encoded once and every copy is acked or nak'ed with it.
type held struct {
	seq, prev uint64
	records   int
	size      int
	msgs      []ackRef
	received  time.Time
	flight    *flight // nil while buffered
}

// partKey is a records file's partition (lake.Part): the tenant and, in a
// table of the dated layout, the UTC day.
type partKey = lake.Part

type partition struct {
	rows           []recfile.Row
	minSeq, maxSeq uint64
}

// buffer is what a worker holds before a flush.
type buffer struct {
	batches   []*held
	parts     map[partKey]*partition
	templates []lake.TemplateRow
	tplMin    uint64
	tplMax    uint64
	bytes     int64
	// cpu is the process's CPU time when the first batch came (cpuOK:
	// known), and wait the time its threads had waited for a CPU (waitOK:
	// known), for highCompression's test of an idle process.
	cpu    time.Duration
	cpuOK  bool
	wait   time.Duration
	waitOK bool
}

func (b *buffer) reset() { *b = buffer{parts: map[partKey]*partition{}} }

// flight is a report waiting for its verdict.
type flight struct {
	report   streams.Report
	batches  []*held
	keys     []string // store keys of its files
	sent     time.Time
	lastPoll time.Time
	warned   time.Time
}

type worker struct {
	e    *Encoder
	idx  int
	id   string
	cons jetstream.Consumer
	kv   jetstream.KeyValue
	log  *slog.Logger

	buf       buffer
	bySeq     map[uint64]*held
	flights   map[string]*flight
	flushes   uint64
	lastTouch time.Time
	// lastRecv is when the last batch was buffered (IdleFlush).
	lastRecv time.Time

	fetch      jetstream.MessageBatch
	msgs       <-chan jetstream.Msg
	fetchAfter time.Time

	watcher    jetstream.KeyWatcher
	watchAfter time.Time

	statusMu sync.Mutex
	status   map[string]string

	scratch []recfile.Row // a batch's rows before they go to partitions
	// records is the array a batch's records are decoded into, cleared
	// after each (receive): the rows keep their fields, not the records.
	records []streams.MinedRecord
	// spare are the row arrays of flushed partitions, cleared, for the
	// next buffer's partitions (spareRows).
	spare [][]recfile.Row
	// lastRows is how many rows each partition of the last flush held:
	// a new partition's array starts at that size (partRows).
	lastRows map[partKey]int
	dates    dateCache
	// layout is the records table's layout the buffer is partitioned by;
	// settled once read from an existing table (it never changes then).
	layout  lake.Layout
	settled bool
}

// appendRow appends row, doubling rows when full: append grows a large
// slice by a quarter, which allocated and copied a partition's rows about
// five times over.
func appendRow(rows []recfile.Row, row recfile.Row) []recfile.Row {
	if len(rows) == cap(rows) {
		rows = slices.Grow(rows, max(len(rows), 16))
	}
	return append(rows, row)
}

// maxKeptRecords bounds the records array a worker keeps for the next
// batch (receive); a frame's batch rarely holds more than a few thousand.
const maxKeptRecords = 1 << 16

// maxSpare bounds the row arrays a worker keeps for its next buffer, and
// maxSpareRows the rows of one kept array (a larger one is left to the GC).
const (
	maxSpare     = 4
	maxSpareRows = 1 << 18
)

// spareRows keeps the row arrays of flushed partitions for the next
// buffer: a flush of 100,000 rows grew its array about 13 times (16 rows
// doubling), 170 MB allocated for 600,000 lines in quarry run. The rows
// are cleared so a kept array holds no message in memory.
func (w *worker) spareRows(parts map[partKey]*partition) {
	clear(w.lastRows)
	if w.lastRows == nil {
		w.lastRows = map[partKey]int{}
	}
	for k, p := range parts {
		w.lastRows[k] = len(p.rows)
		if len(w.spare) == maxSpare || cap(p.rows) > maxSpareRows {
			continue
		}
		clear(p.rows)
		w.spare = append(w.spare, p.rows[:0])
	}
}

// partRows is the row array for a new partition k of the buffer: when k
// held more rows at the last flush than any kept array has room for, a
// new array of that size and a little more (at 125,000 lines a second a
// flush at max_age holds over maxSpareRows rows, and growing its array
// from 16 rows copied every row about twice), else takeRows.
func (w *worker) partRows(k partKey) []recfile.Row {
	if n := w.lastRows[k]; n > 0 && !slices.ContainsFunc(w.spare, func(r []recfile.Row) bool { return cap(r) >= n }) {
		return make([]recfile.Row, 0, n+n/8)
	}
	return w.takeRows()
}

// takeRows is a kept row array, the largest, or nil.
func (w *worker) takeRows() []recfile.Row {
	if len(w.spare) == 0 {
		return nil
	}
	i := 0
	for j := range w.spare {
		if cap(w.spare[j]) > cap(w.spare[i]) {
			i = j
		}
	}
	rows := w.spare[i]
	w.spare = slices.Delete(w.spare, i, i+1)
	return rows
}

// dateCache is lake.Date of the rows' times, formatted once per UTC day
// rather than once per row (it was a tenth of receive's CPU).
type dateCache struct {
	lo, hi int64 // [lo, hi): the nanoseconds of the cached day
	date   string
}

func (c *dateCache) of(ts int64) string {
	if c.date != "" && ts >= c.lo && ts < c.hi {
		return c.date
	}
	y, m, d := time.Unix(0, ts).UTC().Date()
	c.lo = time.Date(y, m, d, 0, 0, 0, 0, time.UTC).UnixNano()
	c.hi = c.lo + int64(24*time.Hour)
	if c.hi < c.lo { // the last day int64 nanoseconds reach
		c.hi = math.MaxInt64
	}
	c.date = lake.Date(ts)
	if ts < c.lo || ts >= c.hi { // the first day, cut by the int64 range
		date := c.date
		c.date = ""
		return date
	}
	return c.date
}

func newWorker(e *Encoder, idx int, id string, cons jetstream.Consumer, kv jetstream.KeyValue) *worker {
	w := &worker{e: e, idx: idx, id: id, cons: cons, kv: kv, log: e.log.With("writer", id),
		bySeq: map[uint64]*held{}, flights: map[string]*flight{}, status: map[string]string{}}
	w.buf.reset()
	return w
}

func (w *worker) setStatus(key, s string) {
	w.statusMu.Lock()
	if s == "" {
		delete(w.status, key)
	} else {
		w.status[key] = s
	}
	w.statusMu.Unlock()
}

func (w *worker) getStatus() string {
	w.statusMu.Lock()
	defer w.statusMu.Unlock()
	var out string
	for _, k := range slices.Sorted(maps.Keys(w.status)) {
		if out != "" {
			out += "; "
		}
		out += w.status[k]
	}
	return out
}

func (w *worker) tickEvery() time.Duration {
	c := w.e.cfg
	d := min(c.AckWait/3, c.MaxAge/4, c.VerdictPoll/2, 500*time.Millisecond)
	return max(d, 5*time.Millisecond)
}

// run is the worker's loop. soft ends fetching; hard ends everything.
func (w *worker) run(soft, hard context.Context) {
	cfg := w.e.cfg
	tick := time.NewTicker(w.tickEvery())
	defer tick.Stop()
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	defer idle.Stop()
	defer w.stopWatch()
	w.lastTouch = time.Now()
	softDone := soft.Done()
	draining := false
	for {
		if hard.Err() != nil {
			if !w.e.isCrashed() {
				w.abandon()
			}
			return
		}
		if !draining && soft.Err() != nil {
			draining, softDone = true, nil
			w.log.Info("encoder worker draining", "buffered", len(w.buf.batches), "reports", len(w.flights))
		}
		if draining && w.msgs == nil && len(w.buf.batches) == 0 && len(w.flights) == 0 {
			return
		}
		now := time.Now()
		if w.shouldFlush(now) || (draining && w.msgs == nil && len(w.buf.batches) > 0) {
			if err := w.flush(hard); err != nil {
				w.log.Error("flush abandoned", "err", err)
			}
			continue
		}
		if w.watcher == nil && now.After(w.watchAfter) {
			w.startWatch(hard)
		}
		if !draining && w.msgs == nil && len(w.flights) < cfg.MaxPendingReports && now.After(w.fetchAfter) {
			w.startFetch()
		}
		var updates <-chan jetstream.KeyValueEntry
		if w.watcher != nil {
			updates = w.watcher.Updates()
		}
		var idleC <-chan time.Time
		if d, ok := w.idleIn(now); ok {
			idle.Reset(d)
			idleC = idle.C
		}
		select {
		case <-idleC:
		case m, ok := <-w.msgs:
			if !ok {
				w.endFetch()
				continue
			}
			w.receive(hard, m)
		case ent, ok := <-updates:
			if !ok {
				w.log.Warn("verdict watch ended", "err", "updates channel closed")
				w.stopWatch()
				w.watchAfter = time.Now().Add(cfg.VerdictPoll)
				continue
			}
			w.onEntry(hard, ent)
		case <-tick.C:
			w.keepAlive(false)
			w.pollVerdicts(hard)
		case <-softDone:
		case <-hard.Done():
		}
	}
}

// fetchBytes is FetchBytes, raised so that the largest message the server
// takes (and its subject and headers) fits one pull: a batch larger than a
// pull's bytes would never be delivered.
func (w *worker) fetchBytes() int {
	n := w.e.cfg.FetchBytes
	if nc := w.e.js.Conn(); nc != nil {
		n = max(n, int(nc.MaxPayload())+4096)
	}
	return n
}

func (w *worker) startFetch() {
	cfg := w.e.cfg
	b, err := w.cons.Fetch(cfg.FetchBatch, jetstream.FetchMaxWait(cfg.FetchWait), jetstream.FetchMaxBytes(w.fetchBytes()))
	if err != nil {
		w.fetchFailed(err)
		return
	}
	w.fetch, w.msgs = b, b.Messages()
}

func (w *worker) endFetch() {
	if err := w.fetch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
		w.fetchFailed(err)
	} else {
		w.setStatus("fetch", "")
	}
	w.fetch, w.msgs = nil, nil
}

// fetchFailed backs off fetching for a second and re-creates the consumer
// if it was deleted.
func (w *worker) fetchFailed(err error) {
	w.log.Warn("fetch", "err", err)
	w.setStatus("fetch", "fetch: "+err.Error())
	w.fetchAfter = time.Now().Add(time.Second)
	if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := EnsureConsumer(ctx, w.e.js, w.e.cfg); err != nil {
			w.log.Error("re-create consumer", "err", err)
		} else {
			w.cons = c
		}
	}
}

func (w *worker) shouldFlush(now time.Time) bool {
	b := &w.buf
	if len(b.batches) == 0 {
		return false
	}
	cfg := w.e.cfg
	if d, ok := w.idleIn(now); ok && d <= 0 {
		return true
	}
	return b.bytes >= cfg.TargetFileBytes || len(b.batches) >= cfg.MaxBatches || now.Sub(b.batches[0].received) >= cfg.MaxAge
}

// idleIn is how long until the buffer is flushed for Config.IdleFlush (ok:
// it holds at least IdleFlushBytes; zero or less: now).
func (w *worker) idleIn(now time.Time) (time.Duration, bool) {
	cfg := w.e.cfg
	if cfg.IdleFlush <= 0 || len(w.buf.batches) == 0 || w.buf.bytes < cfg.IdleFlushBytes {
		return 0, false
	}
	return cfg.IdleFlush - now.Sub(w.lastRecv), true
}

// receive decodes one message and buffers its batch, or dead-letters it.
func (w *worker) receive(ctx context.Context, m jetstream.Msg) {
	var streamSeq uint64
	var delivered uint64
	if md, err := m.Metadata(); err == nil {
		streamSeq, delivered = md.Sequence.Stream, md.NumDelivered
	}
	if f := m.Headers().Get(streams.HeaderFormat); f != "" && !streams.KnownMinedFormat(f) {
		w.deadLetter(ctx, m, streamSeq, fmt.Sprintf("format %q, want %s", f, streams.FormatMined))
		return
	}
	// The rows' strings alias the message until the flush that writes
	// them; template texts, kept longer, are copied (DecodeMinedBatchShared).
	// The records go into the worker's array, which the rows do not keep.
	b := &streams.MinedBatch{Records: w.records}
	err := streams.DecodeMinedBatchSharedInto(b, m.Data())
	defer func() {
		clear(b.Records)
		if c := cap(b.Records); c > cap(w.records) && c <= maxKeptRecords {
			w.records = b.Records[:0]
		}
	}()
	if err == nil {
		if terr := streams.CheckToken(b.Tenant); terr != nil {
			err = fmt.Errorf("%w: batch %d tenant: %v", streams.ErrMalformed, b.WALSeq, terr)
		}
	}
	if err != nil {
		w.deadLetter(ctx, m, streamSeq, "decode mined batch: "+err.Error())
		return
	}
	switch {
	case delivered >= 10 && delivered%10 == 0:
		w.log.Warn("batch delivered many times", "wal_seq", b.WALSeq, "stream_seq", streamSeq, "delivered", delivered)
	case delivered > 1:
		w.log.Debug("batch redelivered", "wal_seq", b.WALSeq, "delivered", delivered)
	}
	w.e.m.inflight.Inc()
	if h, ok := w.bySeq[b.WALSeq]; ok {
		// The same WAL batch again: encode it once, settle every copy with it.
		h.msgs = append(h.msgs, newAckRef(w.e.js.Conn(), m))
		if h.flight == nil {
			w.buf.bytes += int64(len(m.Data()))
		}
		w.log.Info("duplicate batch joined", "wal_seq", b.WALSeq, "stream_seq", streamSeq)
		return
	}
	w.e.m.batches.Inc()
	h := &held{seq: b.WALSeq, prev: b.PrevSeq, records: len(b.Records), size: len(m.Data()), msgs: []ackRef{newAckRef(w.e.js.Conn(), m)}, received: time.Now()}
	w.bySeq[h.seq] = h
	w.lastRecv = h.received
	buf := &w.buf
	if len(buf.batches) == 0 {
		buf.cpu, buf.cpuOK = w.cpuUsed()
		buf.wait, buf.waitOK = w.cpuWaited()
	}
	buf.batches = append(buf.batches, h)
	buf.bytes += int64(h.size)
	w.e.texts.add(b.Templates)
	w.scratch = recfile.AppendBatch(w.scratch[:0], b)
	for _, row := range w.scratch {
		k := partKey{Tenant: b.Tenant}
		if w.layout.Dated {
			k.Date = w.dates.of(row.TS)
		}
		p := buf.parts[k]
		if p == nil {
			p = &partition{rows: w.partRows(k), minSeq: b.WALSeq, maxSeq: b.WALSeq}
			buf.parts[k] = p
		}
		p.rows = appendRow(p.rows, row)
		p.minSeq, p.maxSeq = min(p.minSeq, b.WALSeq), max(p.maxSeq, b.WALSeq)
	}
	clear(w.scratch)
	if len(b.Templates) > 0 {
		if len(buf.templates) == 0 {
			buf.tplMin, buf.tplMax = b.WALSeq, b.WALSeq
		}
		buf.templates = append(buf.templates, templateRows(b)...)
		buf.tplMin, buf.tplMax = min(buf.tplMin, b.WALSeq), max(buf.tplMax, b.WALSeq)
	}
}

// deadLetter sends a message that cannot be decoded to the dead-letter
// stream with the reason, then acks it. If the dead letter cannot be
// written the message is nak'ed for a later attempt: nothing is dropped.
func (w *worker) deadLetter(ctx context.Context, m jetstream.Msg, streamSeq uint64, reason string) {
	w.log.Warn("dead-lettering batch", "stream_seq", streamSeq, "subject", m.Subject(), "reason", reason)
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := streams.DeadLetter(dctx, w.e.js, Stage, m.Subject(), streamSeq, m.Data(), reason, nil); err != nil {
		w.log.Error("dead-letter", "stream_seq", streamSeq, "err", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	w.e.m.deadLetters.Inc()
	if err := m.DoubleAck(dctx); err != nil {
		w.log.Warn("ack dead-lettered batch", "stream_seq", streamSeq, "err", err)
	}
}

// keepAlive sends InProgress for every held message once per AckWait/3
// (or now, if force).
func (w *worker) keepAlive(force bool) {
	now := time.Now()
	if !force && now.Sub(w.lastTouch) < w.e.cfg.AckWait/3 {
		return
	}
	w.lastTouch = now
	for _, h := range w.bySeq {
		for _, a := range h.msgs {
			_ = a.inProgress()
		}
	}
}

// flush encodes, uploads and reports the buffer; the batches move to a
// flight waiting for its verdict. It returns an error only when ctx ended
// before the report was published; the batches are then still buffered.
func (w *worker) flush(ctx context.Context) error {
	start := time.Now()
	w.flushes++
	reportID := w.id + "." + strconv.FormatUint(w.flushes, 10)
	// The flush number is part of the writer token of file names: a name is
	// never reused by a later flush, so deleting a rejected report's files
	// can never remove a file another report owns.
	writer := w.id + "-" + strconv.FormatUint(w.flushes, 10)
	buf := &w.buf
	f := &flight{report: streams.Report{ID: reportID, Encoder: w.id}}

	type out struct {
		table, path string
		data        []byte
		info        streams.FileInfo
	}
	var files []out
	var records int64
	if err := w.settleLayout(ctx); err != nil {
		return w.failFlush(ctx, err, nil, false)
	}
	high := w.highCompression()
	keys := slices.SortedFunc(maps.Keys(buf.parts), func(a, b partKey) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Date, b.Date))
	})
	encoded, err := w.encodeParts(ctx, keys, high)
	if err != nil {
		// Encoding in-memory rows fails only on a bug (or ctx ended);
		// keep the batches and let them be redelivered after a nak.
		return w.failFlush(ctx, err, nil, false)
	}
	for i, k := range keys {
		p := buf.parts[k]
		path := k.FilePath(lake.FileName(p.minSeq, p.maxSeq, writer))
		files = append(files, out{table: streams.TableRecords, path: path, data: encoded[i].data, info: streams.FileInfo{
			Table: streams.TableRecords, Path: path, Size: int64(len(encoded[i].data)),
			PartitionValues: k.PartitionValues(),
			NumRecords:      int64(len(p.rows)), Stats: encoded[i].stats,
		}})
		records += int64(len(p.rows))
	}
	if len(buf.templates) > 0 {
		lake.SortTemplateRows(buf.templates)
		data, err := lake.EncodeTemplates(buf.templates, high)
		if err != nil {
			return w.failFlush(ctx, fmt.Errorf("encode templates: %w", err), nil, false)
		}
		path := lake.FileName(buf.tplMin, buf.tplMax, writer)
		files = append(files, out{table: streams.TableTemplates, path: path, data: data, info: streams.FileInfo{
			Table: streams.TableTemplates, Path: path, Size: int64(len(data)), PartitionValues: map[string]string{},
			NumRecords: int64(len(buf.templates)), Stats: lake.TemplateStats(buf.templates),
		}})
	}

	var uploaded []string
	for _, o := range files {
		key := o.table + "/" + o.path
		err := w.retry(ctx, "upload", func(ctx context.Context) error {
			uctx, cancel := context.WithTimeout(ctx, w.e.cfg.UploadTimeout)
			defer cancel()
			if err := w.e.store.Put(uctx, key, o.data); err != nil {
				return fmt.Errorf("upload %s: %w", key, err)
			}
			return nil
		})
		if err != nil {
			return w.failFlush(ctx, err, uploaded, false)
		}
		uploaded = append(uploaded, key)
		o.info.ModificationTime = time.Now().UnixMilli()
		f.report.Files = append(f.report.Files, o.info)
		w.e.m.files.Inc()
		w.e.m.bytes.Add(float64(len(o.data)))
	}
	f.keys = uploaded
	crashpoint.Hit("encoder.after-upload")

	for _, h := range buf.batches {
		f.report.Batches = append(f.report.Batches, streams.BatchRef{Seq: h.seq, Prev: h.prev, Records: h.records})
	}
	slices.SortFunc(f.report.Batches, func(a, b streams.BatchRef) int { return cmpInt(int64(a.Seq), int64(b.Seq)) })
	f.report.CreatedAt = time.Now().UTC()
	payload, err := json.Marshal(&f.report)
	if err != nil {
		return w.failFlush(ctx, fmt.Errorf("marshal report %s: %w", reportID, err), uploaded, false)
	}
	if limit := w.reportLimit(reportID); len(payload) > limit {
		// A report over the NATS max payload can never be published.
		// Several batches: flush them as two reports of disjoint batches,
		// each with its own files (the committer judges each alone). One
		// batch: drop the optional file stats; if even that is too large
		// the batch cannot be reported, and Ready says so.
		if len(buf.batches) > 1 {
			w.deleteKeys(10*time.Second, uploaded)
			w.log.Warn("report over the max payload, splitting the flush", "report", reportID, "bytes", len(payload), "limit", limit, "batches", len(buf.batches))
			w.e.m.splits.Inc()
			return w.splitFlush(ctx)
		}
		for i := range f.report.Files {
			f.report.Files[i].Stats = ""
		}
		if payload, err = json.Marshal(&f.report); err == nil && len(payload) > limit {
			err = fmt.Errorf("report %s of batch %d is %d bytes without file stats, over the max payload %d", reportID, buf.batches[0].seq, len(payload), limit)
		}
		if err != nil {
			w.setStatus("report-size", err.Error())
			return w.failFlush(ctx, err, uploaded, false)
		}
		w.log.Warn("report over the max payload, file stats dropped", "report", reportID, "batch", buf.batches[0].seq)
	}
	w.setStatus("report-size", "")
	err = w.retry(ctx, "report", func(ctx context.Context) error {
		msg := nats.NewMsg(streams.ReportSubject(w.id))
		msg.Header.Set(streams.HeaderMsgID, reportID)
		msg.Header.Set(streams.HeaderFormat, streams.FormatReport)
		msg.Data = payload
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := w.e.js.PublishMsg(pctx, msg); err != nil {
			return fmt.Errorf("publish report %s: %w", reportID, err)
		}
		return nil
	})
	if err != nil {
		// The report may have been stored even though no ack came back: its
		// files must stay (they may be accepted); if not, vacuum removes them.
		return w.failFlush(ctx, err, uploaded, true)
	}

	crashpoint.Hit("encoder.after-report")
	now := time.Now()
	f.batches = buf.batches
	f.sent, f.lastPoll = now, now
	for _, h := range f.batches {
		h.flight = f
	}
	w.flights[reportID] = f
	w.spareRows(buf.parts)
	buffered := buf.bytes
	buf.reset()
	w.e.m.records.Add(float64(records))
	w.e.m.flush.Observe(time.Since(start).Seconds())
	w.log.Debug("report published", "report", reportID, "batches", len(f.report.Batches), "files", len(f.report.Files), "records", records,
		"buffered_bytes", buffered, "zstd_best", high)
	if hook := w.e.afterReport; hook != nil {
		hook(w, reportID)
	}
	return nil
}

// reportLimit is the largest report payload the connection can publish
// with id's headers.
func (w *worker) reportLimit(id string) int {
	const headers = 128 // "NATS/1.0", Quarry-Format and framing
	return int(w.e.js.Conn().MaxPayload()) - headers - len(streams.HeaderMsgID) - len(id)
}

// splitFlush flushes the buffer as two flushes: the batches below the
// median WAL sequence and the rest, each with the rows and template rows of
// its own batches. When the first fails, the second's batches are released
// too (nak'ed: redelivered and encoded again).
func (w *worker) splitFlush(ctx context.Context) error {
	lo, hi := w.buf.split()
	w.buf = lo
	if err := w.flush(ctx); err != nil {
		for _, h := range hi.batches {
			w.release(h, false)
		}
		return err
	}
	w.buf = hi
	return w.flush(ctx)
}

// split divides b by WAL sequence into two non-empty buffers (b has at
// least two batches).
func (b *buffer) split() (lo, hi buffer) {
	seqs := make([]uint64, 0, len(b.batches))
	for _, h := range b.batches {
		seqs = append(seqs, h.seq)
	}
	slices.Sort(seqs)
	cut := seqs[len(seqs)/2] // hi holds the seqs >= cut
	lo.reset()
	hi.reset()
	side := func(seq uint64) *buffer {
		if seq < cut {
			return &lo
		}
		return &hi
	}
	for _, h := range b.batches {
		t := side(h.seq)
		t.batches = append(t.batches, h)
		t.bytes += int64(h.size)
	}
	for k, p := range b.parts {
		for _, row := range p.rows {
			t := side(row.WALSeq)
			q := t.parts[k]
			if q == nil {
				q = &partition{minSeq: row.WALSeq, maxSeq: row.WALSeq}
				t.parts[k] = q
			}
			q.rows = append(q.rows, row)
			q.minSeq, q.maxSeq = min(q.minSeq, row.WALSeq), max(q.maxSeq, row.WALSeq)
		}
	}
	for _, tr := range b.templates {
		seq := uint64(tr.WALSeq)
		t := side(seq)
		if len(t.templates) == 0 {
			t.tplMin, t.tplMax = seq, seq
		}
		t.templates = append(t.templates, tr)
		t.tplMin, t.tplMax = min(t.tplMin, seq), max(t.tplMax, seq)
	}
	return lo, hi
}

// highCompression reports whether the flush of w's buffer writes its
// records files at zstd's best level (Config.HighCompression: always,
// never, or in auto as Config.HighCompressionBelow says): the
// buffer is flushed by age or at the drain, not for its size or batch
// count, holds less than the process's share of HighCompressionBelow, and
// the process used less than half a core while it filled, without waiting
// for a CPU half as long as it ran. Little input alone is not idleness: at
// a run's start the stages before the encoder are busy and send it little
// (a first flush of 48,000 lines at best cost 4% of a saturated quarry
// run's CPU), and a process that other work starves of CPU uses little of
// it too (an ingest run on a machine running other builds spent 11% of its
// CPU in zstd's best level before the wait was counted).
func (w *worker) highCompression() bool {
	cfg := w.e.cfg
	b := &w.buf
	switch cfg.HighCompression {
	case HighCompressionAlways:
		return true
	case HighCompressionNever:
		return false
	}
	if cfg.HighCompressionBelow <= 0 || len(b.batches) == 0 || b.bytes >= cfg.TargetFileBytes ||
		len(b.batches) >= cfg.MaxBatches || b.bytes*int64(cfg.Workers) >= cfg.HighCompressionBelow || !b.cpuOK {
		return false
	}
	now, ok := w.cpuUsed()
	if !ok {
		return false
	}
	ran := now - b.cpu
	if ran >= time.Since(b.batches[0].received)/2 {
		return false
	}
	if b.waitOK {
		if wait, ok := w.cpuWaited(); ok && 2*(wait-b.wait) > ran {
			return false // starved, not idle
		}
	}
	return true
}

func (w *worker) cpuUsed() (time.Duration, bool) {
	if f := w.e.cpuUsed; f != nil {
		return f()
	}
	return cputime.Used()
}

func (w *worker) cpuWaited() (time.Duration, bool) {
	if f := w.e.cpuWaited; f != nil {
		return f()
	}
	return cputime.Waited()
}

// encodeSlots bounds the records files the process's workers encode at
// once to GOMAXPROCS: more would not run sooner, and each encode in
// progress holds zstd encoders (about 4 MB at zstd's default level, 34 MB
// at its best, which an idle flush uses) that recfile keeps for
// reuse only up to GOMAXPROCS per level. Unbounded, a quarry run of three
// tenants built 141 MB of zstd encoders instead of 38 MB (QUARRY_MEMPROFILE).
var encodeSlots = make(chan struct{}, runtime.GOMAXPROCS(0))

// ReserveEncodeSlot takes one of the process's encode slots (GOMAXPROCS)
// away from the encoders until release is called, so that their flushes
// keep a core free for the rest of the process: in quarry run, which runs
// the producer, the NATS server and the encoders in one process, two
// encodes on both cores of a 2-core machine held every goroutine of the
// WAL's publish→ack path waiting for a CPU for 100 to 600 ms at a time
// (docs/benchmarks.md, the ack tail). It does nothing (release is a no-op)
// when the process has a single slot, which the encoders need. It waits
// for a slot while every one is encoding; ctx bounds that wait.
func ReserveEncodeSlot(ctx context.Context) (release func(), err error) {
	if cap(encodeSlots) < 2 {
		return func() {}, nil
	}
	select {
	case encodeSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("reserve an encode slot: %w", ctx.Err())
	}
	var once sync.Once
	return func() { once.Do(func() { <-encodeSlots }) }, nil
}

// EncodeSlotsInUse is the number of the process's encode slots taken,
// by encodes in progress and by ReserveEncodeSlot, of GOMAXPROCS.
func EncodeSlotsInUse() int { return len(encodeSlots) }

// encodedPart is a partition's records file and its stats.
type encodedPart struct {
	data  []byte
	stats string
}

// encodeParts writes the records file of each buffered partition in keys,
// in keys' order. The template texts are looked up one partition after the
// other (a lookup may wait for texts, keeping the batches alive); the
// files are then encoded at once, up to GOMAXPROCS at a time in the
// process (encodeSlots): a flush of
// three tenants' partitions was encoded on one core while the other
// waited (quarry run's drain after the last frame). Each file is the same
// as when encoded alone (Encode is deterministic).
func (w *worker) encodeParts(ctx context.Context, keys []partKey, high bool) ([]encodedPart, error) {
	type job struct {
		tpl    recfile.Templates
		tplErr error
		file   recfile.File
		err    error
	}
	jobs := make([]job, len(keys))
	for i, k := range keys {
		jobs[i].tpl, jobs[i].tplErr = w.e.texts.templatesFor(ctx, k.Tenant, w.buf.parts[k].rows, w.e.cfg.TemplateWait, func(missing error) {
			w.setStatus("templates", missing.Error())
			w.keepAlive(false)
		})
		w.setStatus("templates", "")
		if jobs[i].tplErr != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("encode %s: %w", k, jobs[i].tplErr)
		}
	}
	opts := append(w.layout.EncodeOptions(), recfile.WithHighCompression(high))
	var wg sync.WaitGroup
	for i, k := range keys {
		j := &jobs[i]
		if j.tplErr != nil {
			continue
		}
		rows := w.buf.parts[k].rows
		encodeSlots <- struct{}{}
		wg.Go(func() {
			defer func() { <-encodeSlots }()
			j.file, j.err = recfile.Encode(rows, j.tpl, opts...)
		})
	}
	wg.Wait()
	w.keepAlive(false)
	out := make([]encodedPart, len(keys))
	for i, k := range keys {
		j := &jobs[i]
		var err error
		out[i].data, out[i].stats, err = w.encodeRecords(ctx, k.Tenant, w.buf.parts[k].rows, j.tplErr, j.file, j.err, high)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", k, err)
		}
	}
	return out, nil
}

// encodeRecords is a partition's records file given the outcome of its
// template lookup (tplErr) and of recfile.Encode (file, encErr): records v3
// (internal/recfile) with the template texts the rows use. When a text
// cannot be found within Config.TemplateWait, or recfile refuses the rows
// as not matching their templates, the file is written in records v2
// instead (parameters as text, rendered with the templates table at read
// time, as before v3), so no record is held up or lost; either is logged
// as an error and counted in quarry_encoder_v2_files_total.
func (w *worker) encodeRecords(ctx context.Context, tenant string, rows []recfile.Row, tplErr error, file recfile.File, encErr error, high bool) (data []byte, stats string, err error) {
	if tplErr == nil {
		if encErr == nil {
			if high {
				w.e.m.highFiles.Inc()
			}
			return file.Data, file.Stats, nil
		}
		if !errors.Is(encErr, recfile.ErrInput) {
			return nil, "", encErr
		}
		w.log.Error("records do not fit their templates, file written as records v2", "tenant", tenant, "err", encErr)
	} else {
		if ctx.Err() != nil {
			return nil, "", tplErr
		}
		w.log.Error("template texts not found, file written as records v2", "tenant", tenant, "wait", w.e.cfg.TemplateWait, "err", tplErr)
	}
	v2 := v2Rows(rows)
	sortRecordRows(v2)
	if w.layout.DateColumn() {
		data, err = encodeParquet(lake.DatedRecordRows(v2))
	} else {
		data, err = encodeParquet(v2)
	}
	if err != nil {
		return nil, "", err
	}
	w.e.m.v2Files.Inc()
	return data, lake.RecordRowStats(v2), nil
}

// settleLayout reads the records table's layout until the table exists
// (the committer creates it in lake.CurrentLayout, which the buffer is
// partitioned by until then); a table found in another layout (created by
// an older committer) re-partitions the buffer.
func (w *worker) settleLayout(ctx context.Context) error {
	if w.settled {
		return nil
	}
	var l lake.Layout
	var exists bool
	err := w.retry(ctx, "read the records layout", func(ctx context.Context) (err error) {
		l, exists, err = lake.ReadLayout(ctx, w.e.store)
		return err
	})
	if err != nil {
		return err
	}
	w.settled = exists
	if l == w.layout {
		return nil
	}
	w.log.Info("records table layout", "partitioned_by", l.String())
	w.layout = l
	parts := w.buf.parts
	w.buf.parts = map[partKey]*partition{}
	for k, p := range parts {
		for _, row := range p.rows {
			nk := l.PartOf(k.Tenant, row.TS)
			q := w.buf.parts[nk]
			if q == nil {
				q = &partition{minSeq: row.WALSeq, maxSeq: row.WALSeq}
				w.buf.parts[nk] = q
			}
			q.rows = append(q.rows, row)
			q.minSeq, q.maxSeq = min(q.minSeq, row.WALSeq), max(q.maxSeq, row.WALSeq)
		}
	}
	return nil
}

// failFlush handles a flush that cannot complete. On ctx end (drain deadline)
// the batches stay buffered for abandon to nak; uploaded files of a report
// never published are deleted (best effort). Any other error naks the
// batches now so they are re-encoded, possibly elsewhere.
func (w *worker) failFlush(ctx context.Context, err error, uploaded []string, published bool) error {
	if !published {
		w.deleteKeys(10*time.Second, uploaded)
	}
	if ctx.Err() != nil {
		return err
	}
	w.log.Error("flush failed, batches nak'ed", "err", err, "batches", len(w.buf.batches))
	for _, h := range w.buf.batches {
		w.release(h, false)
	}
	w.buf.reset()
	return err
}

func (w *worker) deleteKeys(timeout time.Duration, keys []string) {
	for _, k := range keys {
		dctx, cancel := context.WithTimeout(context.Background(), timeout)
		if err := w.e.store.Delete(dctx, k); err != nil {
			w.log.Warn("delete file, left for vacuum", "key", k, "err", err)
		}
		cancel()
	}
}

// retry calls fn until it succeeds or ctx ends, backing off from 100ms to
// 5s and keeping the held batches in progress meanwhile.
func (w *worker) retry(ctx context.Context, what string, fn func(context.Context) error) error {
	attempt := 0
	var last error
	err := backoff.Retry(ctx, backoff.Default, func(ctx context.Context) error {
		attempt++
		if attempt > 1 {
			w.keepAlive(false)
		}
		last = fn(ctx)
		return last
	}, func(err error, _ time.Duration) {
		w.log.Warn(what+" failed, retrying", "attempt", attempt, "err", err)
		w.setStatus(what, err.Error())
		w.keepAlive(false)
	})
	switch {
	case err == nil:
		if attempt > 1 {
			w.setStatus(what, "")
		}
		return nil
	case ctx.Err() != nil:
		return last // the caller sees the operation's error, not the context's
	}
	return err
}

func (w *worker) startWatch(ctx context.Context) {
	kw, err := w.kv.Watch(ctx, streams.VerdictKey(w.id)+".*")
	if err != nil {
		w.log.Warn("watch verdicts", "err", err)
		w.watchAfter = time.Now().Add(5 * w.e.cfg.VerdictPoll)
		return
	}
	w.watcher = kw
}

func (w *worker) stopWatch() {
	if w.watcher != nil {
		_ = w.watcher.Stop()
		w.watcher = nil
	}
}

func (w *worker) onEntry(ctx context.Context, ent jetstream.KeyValueEntry) {
	if ent == nil || ent.Operation() != jetstream.KeyValuePut {
		return
	}
	v, err := streams.DecodeVerdict(ent.Value())
	if err != nil {
		w.log.Error("bad verdict", "key", ent.Key(), "err", err)
		return
	}
	if f := w.flights[v.ReportID]; f != nil && streams.VerdictKey(v.ReportID) == ent.Key() {
		w.settle(ctx, f, v)
	}
}

// pollVerdicts reads the verdicts of reports that waited VerdictPoll since
// the last look, and warns about overdue ones.
func (w *worker) pollVerdicts(ctx context.Context) {
	now := time.Now()
	every := w.e.cfg.VerdictPoll
	if w.watcher != nil {
		every *= 5 // the watch delivers verdicts; the poll only guards against a missed update
	}
	for _, f := range w.flights {
		if now.Sub(f.lastPoll) < every {
			continue
		}
		f.lastPoll = now
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ent, err := w.kv.Get(gctx, streams.VerdictKey(f.report.ID))
		cancel()
		switch {
		case err == nil:
			w.onEntry(ctx, ent)
			continue
		case errors.Is(err, jetstream.ErrKeyNotFound):
		default:
			w.log.Warn("read verdict", "report", f.report.ID, "err", err)
		}
	}
	// Every waiting report counts, not only those polled on this tick: Ready
	// must keep saying what the worker waits for between polls.
	var overdue []string
	for _, f := range w.flights {
		if wait := now.Sub(f.sent); wait >= w.e.cfg.VerdictTimeout {
			overdue = append(overdue, f.report.ID)
			if now.Sub(f.warned) >= w.e.cfg.VerdictTimeout {
				f.warned = now
				w.log.Error("verdict overdue, still waiting: is the committer running?", "report", f.report.ID,
					"waited", wait.Round(time.Second), "batches", len(f.batches))
			}
		}
	}
	if len(overdue) > 0 {
		slices.Sort(overdue)
		w.setStatus("verdict", fmt.Sprintf("waiting for the verdict on %d report(s) for over %s (oldest %s)", len(overdue), w.e.cfg.VerdictTimeout, overdue[0]))
	} else {
		w.setStatus("verdict", "")
	}
}

// settle applies a verdict: accepted acks every batch; rejected deletes the
// files, acks the duplicates and naks the rest.
func (w *worker) settle(ctx context.Context, f *flight, v *streams.Verdict) {
	delete(w.flights, f.report.ID)
	if v.Accepted {
		w.e.m.verdicts.WithLabelValues("accepted").Inc()
		w.ackAll(ctx, f.batches)
		w.log.Debug("report accepted", "report", f.report.ID, "batches", len(f.batches))
		return
	}
	w.e.m.verdicts.WithLabelValues("rejected").Inc()
	w.log.Info("report rejected", "report", f.report.ID, "reason", v.Reason, "duplicates", len(v.Duplicates), "batches", len(f.batches))
	w.deleteKeys(w.e.cfg.UploadTimeout, f.keys)
	dup := make(map[uint64]bool, len(v.Duplicates))
	for _, s := range v.Duplicates {
		dup[s] = true
	}
	var acks []*held
	for _, h := range f.batches {
		if dup[h.seq] {
			acks = append(acks, h)
		} else {
			w.release(h, false)
		}
	}
	w.ackAll(ctx, acks)
}

// ackAll acks the batches with confirmed acks, a few at a time.
func (w *worker) ackAll(ctx context.Context, hs []*held) {
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, h := range hs {
		for _, a := range h.msgs {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				var err error
				for range 3 {
					actx, cancel := context.WithTimeout(ctx, 5*time.Second)
					err = a.ackSync(actx)
					cancel()
					if err == nil || ctx.Err() != nil {
						break
					}
				}
				if err != nil {
					// Redelivered later, re-encoded, reported and acked as a
					// duplicate of the accepted report.
					w.log.Warn("ack", "wal_seq", h.seq, "err", err)
				}
			})
		}
	}
	wg.Wait()
	for _, h := range hs {
		w.forget(h)
	}
}

// release naks a batch (or only forgets it, after a crash) so it is
// redelivered.
func (w *worker) release(h *held, quiet bool) {
	if !quiet {
		for _, a := range h.msgs {
			_ = a.nak()
		}
	}
	w.forget(h)
}

func (w *worker) forget(h *held) {
	if w.bySeq[h.seq] == h {
		delete(w.bySeq, h.seq)
		w.e.m.inflight.Sub(float64(len(h.msgs)))
	}
}

// abandon ends a drain that ran out of time: everything still held is
// nak'ed so other workers take it over. Files of waiting reports stay: they
// may still be accepted, else vacuum removes them.
func (w *worker) abandon() {
	n := len(w.bySeq)
	for _, h := range w.bySeq {
		w.release(h, false)
	}
	w.buf.reset()
	w.flights = map[string]*flight{}
	if w.msgs != nil {
		// Messages of the pull in progress: nak them as they arrive.
		t := time.NewTimer(w.e.cfg.FetchWait + time.Second)
		defer t.Stop()
	loop:
		for {
			select {
			case m, ok := <-w.msgs:
				if !ok {
					break loop
				}
				_ = m.Nak()
				n++
			case <-t.C:
				break loop
			}
		}
		w.fetch, w.msgs = nil, nil
	}
	if n > 0 {
		w.log.Warn("drain deadline: batches nak'ed", "batches", n)
	}
}
