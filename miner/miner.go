// Package miner is quarry's WAL consumer stage: it reads QUARRY_WAL in
// sequence order with one ordered consumer, mines every record into a
// template (internal/mining, one tree per tenant, one cluster-wide template
// id counter) and publishes one mined batch (mined/1) per WAL message to the
// work queue QUARRY_MINED, plus a template event (template/1) per template
// birth or widening to QUARRY_TEMPLATES.
//
// # Delivery contract
//
// Position. An ordered consumer keeps no position, so the miner keeps it in
// its snapshots: the object store quarry_snapshots holds "miner-<seq>"
// blobs (the mining model, the WAL sequence S it covers, the PrevSeq chain
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
// Bad input. A WAL message that does not decode as frame/1 is sent to
// QUARRY_DLQ (quarry.dlq.miner, reason in Quarry-Reason) and still yields an
// empty batch with Quarantined = 1, so the committer's PrevSeq chain goes on.
// A record whose text or attributes are not valid UTF-8 (the lake's string
// columns require it) is dead-lettered alone, as a one-record frame/1 with
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
package miner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/crashpoint"
	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/streams"
)

// Stage is the miner's name in dead letters and logs.
const Stage = "miner"

// KeySnapshot is the key in streams.PositionsBucket holding the WAL sequence
// of the miner's newest snapshot: a restart replays the WAL from the next
// sequence, so the WAL must keep every message above it.
const KeySnapshot = streams.KeyMiner + ".snapshot"

// InvalidTenant is the tenant of the empty batch of a WAL message whose
// tenant cannot be told.
const InvalidTenant = "_invalid"

// HeaderRecordIndex is set on a dead-lettered record: its index in the frame.
const HeaderRecordIndex = "Quarry-Record-Index"

// Errors callers may branch on.
var (
	// ErrBatchTooLarge: a mined batch exceeds the work queue's max message
	// size. The miner stops; nothing is lost.
	ErrBatchTooLarge = errors.New("mined batch exceeds the max message size")
	// ErrWALBehind: the WAL's last sequence is below the newest snapshot's.
	ErrWALBehind = errors.New("WAL is behind the miner snapshot")
	// ErrWALPurged: the WAL was purged above the restored snapshot, so the
	// messages between them cannot be replayed. The miner refuses to skip
	// them (ids would silently differ from an uninterrupted run); the
	// committer purges below the oldest stored snapshot to prevent it.
	ErrWALPurged = errors.New("WAL purged above the miner snapshot")
	// ErrRunning: Run was called while the miner is running.
	ErrRunning = errors.New("miner already running")
)

// Miner is the WAL consumer stage. Create it with New and drive it with Run.
type Miner struct {
	cfg     Config
	js      jetstream.JetStream
	log     *slog.Logger
	metrics *metrics

	running atomic.Bool
	// waiting is what the miner waits for (nil when healthy).
	waiting atomic.Pointer[string]
	// blockedSince is when a publish started failing (unix nanos, 0 = not).
	blockedSince atomic.Int64
	blockedErr   atomic.Pointer[string]
	// oldestPending is when the oldest unacked publish was sent.
	oldestPending atomic.Int64
	inFlight      atomic.Int64
}

// New checks cfg (after Defaults) and returns a miner.
func New(cfg Config, deps Deps) (*Miner, error) {
	cfg = cfg.Defaults()
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if deps.JS == nil {
		errs = append(errs, errors.New("miner: deps.JS is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	met, err := newMetrics(deps.Registerer)
	if err != nil {
		return nil, err
	}
	log := deps.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Miner{cfg: cfg, js: deps.JS, log: log.With("stage", Stage), metrics: met}
	m.setWaiting("not started")
	return m, nil
}

// Config returns the effective configuration.
func (m *Miner) Config() Config { return m.cfg }

func (m *Miner) setWaiting(s string) {
	if s == "" {
		m.waiting.Store(nil)
		return
	}
	m.waiting.Store(&s)
}

// Ready returns nil while the miner runs and can publish; otherwise it says
// what the miner waits for.
func (m *Miner) Ready() error {
	if w := m.waiting.Load(); w != nil {
		return errors.New(*w)
	}
	if nc := m.js.Conn(); nc != nil && !nc.IsConnected() {
		return fmt.Errorf("waiting for the NATS connection (%s)", nc.Status())
	}
	if since := m.blockedSince.Load(); since != 0 {
		reason := ""
		if e := m.blockedErr.Load(); e != nil {
			reason = ": " + *e
		}
		return fmt.Errorf("publishing blocked since %s (%d WAL messages in flight)%s",
			time.Unix(0, since).UTC().Format(time.RFC3339), m.inFlight.Load(), reason)
	}
	if old := m.oldestPending.Load(); old != 0 && time.Since(time.Unix(0, old)) > m.cfg.BlockedAfter {
		return fmt.Errorf("publishing blocked since %s: no ack yet (%d WAL messages in flight)",
			time.Unix(0, old).UTC().Format(time.RFC3339), m.inFlight.Load())
	}
	return nil
}

// item is one WAL message, decoded and tokenized off the mining goroutine.
type item struct {
	seq     uint64
	pending uint64
	subject string
	data    []byte
	frame   *streams.Frame // nil when the message does not decode
	err     error          // why it does not decode
	prep    []mining.Prepared
	bad     []string // per record: why it is quarantined ("" = fine); nil when none is
}

// pending is one WAL message's publishes, acked in WAL order.
type pending struct {
	seq  uint64
	at   time.Time
	msgs []*nats.Msg
	futs []jetstream.PubAckFuture // nil entry: publish synchronously
}

type snapJob struct {
	seq  uint64
	blob []byte
}

// runner is the state of one Run.
type runner struct {
	*Miner
	model    *mining.Model
	st       State
	obs      jetstream.ObjectStore
	kv       jetstream.KeyValue
	maxBatch int // bytes of the largest batch the work queue takes
	maxFrame int // bytes of the largest WAL message

	inflight  chan *pending
	ackerDone chan struct{}
	acked     atomic.Uint64
	ackedCh   chan struct{}
	snapJobs  chan snapJob
	snapBusy  atomic.Bool
	lastSnap  atomic.Uint64
	events    []mining.Event
	// acker only
	pubBackoff *backoff.Backoff // carries over between messages while publishing fails
	pubWarned  time.Time
	dirty      bool // the model holds a partly processed message: no snapshot
	sinceSnap  int
	snapAt     time.Time
}

// Run mines the WAL until ctx ends (then it drains and returns nil) or a
// fatal error (returned).
func (m *Miner) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer m.running.Store(false)
	defer m.setWaiting("stopped")

	r := &runner{Miner: m, pubBackoff: backoff.New(m.cfg.retryPolicy())}
	if err := r.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return r.run(ctx)
}

// retry calls fn until it succeeds or ctx ends, reporting what it waits for.
func (m *Miner) retry(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	err := backoff.Retry(ctx, m.cfg.retryPolicy(), func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, m.cfg.SnapshotTimeout)
		defer cancel()
		return fn(cctx)
	}, func(err error, wait time.Duration) {
		m.setWaiting(fmt.Sprintf("waiting for %s: %v", what, err))
		m.log.Warn("retry", "what", what, "err", err, "backoff", wait)
	})
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// start restores the newest snapshot and looks up the limits.
func (r *runner) start(ctx context.Context) error {
	r.setWaiting("restoring snapshot")
	if err := r.retry(ctx, "snapshot store "+streams.SnapshotBucket, func(ctx context.Context) (err error) {
		r.obs, err = r.js.ObjectStore(ctx, streams.SnapshotBucket)
		return err
	}); err != nil {
		return err
	}
	if err := r.retry(ctx, "key-value bucket "+streams.PositionsBucket, func(ctx context.Context) (err error) {
		r.kv, err = r.js.KeyValue(ctx, streams.PositionsBucket)
		return err
	}); err != nil {
		return err
	}
	var st *State
	var model *mining.Model
	var fatal error
	if err := r.retry(ctx, "snapshots", func(ctx context.Context) (err error) {
		st, model, err = loadNewest(ctx, r.obs, r.cfg.Mining, r.log, r.metrics.snapshotSkipped.Inc)
		if errors.Is(err, ErrNoUsableSnapshot) {
			fatal, err = err, nil
		}
		return err
	}); err != nil {
		return err
	}
	if fatal != nil {
		return fatal
	}
	if model == nil {
		var err error
		if model, err = mining.New(r.cfg.Mining); err != nil {
			return fmt.Errorf("new mining model: %w", err)
		}
		st = &State{MiningConfig: miningConfigJSON(r.cfg.Mining)}
		r.log.Info("no snapshot, mining the WAL from the start")
	} else {
		r.log.Info("restored snapshot", "wal_seq", st.WALSeq, "frames", st.Frames, "records", st.Records,
			"templates", model.Stats().Templates)
	}
	st.MiningConfig = miningConfigJSON(r.cfg.Mining)
	if st.Tenants == nil {
		st.Tenants = map[string]*TenantCounters{}
	}
	r.model, r.st = model, *st
	r.acked.Store(st.WALSeq)
	r.lastSnap.Store(st.WALSeq)
	r.metrics.position.Set(float64(st.WALSeq))

	// The largest batch the work queue takes: its max message size and the
	// server's max payload, less room for the headers. The WAL must not be
	// behind the snapshot: a WAL deleted and recreated restarts its
	// sequences, and the miner would wait for sequences that never come.
	if err := r.retry(ctx, "streams", func(ctx context.Context) error {
		mined, err := r.js.Stream(ctx, streams.MinedStream)
		if err != nil {
			return err
		}
		wal, err := r.js.Stream(ctx, streams.WALStream)
		if err != nil {
			return err
		}
		payload := int(r.js.Conn().MaxPayload()) // known once connected
		if payload <= 0 {
			payload = 1 << 20
		}
		r.maxBatch = payload
		if lim := int(mined.CachedInfo().Config.MaxMsgSize); lim > 0 && lim < r.maxBatch {
			r.maxBatch = lim
		}
		r.maxBatch -= 1024
		r.maxFrame = payload
		if lim := int(wal.CachedInfo().Config.MaxMsgSize); lim > r.maxFrame {
			r.maxFrame = lim
		}
		walInfo := wal.CachedInfo()
		if last := walInfo.State.LastSeq; last < st.WALSeq {
			fatal = fmt.Errorf("%w: %s ends at sequence %d, the snapshot covers up to %d (was the stream recreated?)",
				ErrWALBehind, streams.WALStream, last, st.WALSeq)
		} else if first := walInfo.State.FirstSeq; st.WALSeq > 0 && first > st.WALSeq+1 {
			fatal = fmt.Errorf("%w: %s starts at sequence %d, the restored snapshot covers up to %d; mining on without %d..%d would hand out template ids an uninterrupted run does not",
				ErrWALPurged, streams.WALStream, first, st.WALSeq, st.WALSeq+1, first-1)
		}
		return nil
	}); err != nil {
		return err
	}
	return fatal
}

func (r *runner) run(ctx context.Context) error {
	r.inflight = make(chan *pending, r.cfg.MaxInFlight)
	r.ackerDone = make(chan struct{})
	r.ackedCh = make(chan struct{}, 1)
	r.snapJobs = make(chan snapJob, 1)
	r.snapAt = time.Now()

	// The acker and the snapshotter outlive ctx: they finish the drain.
	pubCtx, cancelPub := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelPub()
	snapCtx, cancelSnap := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSnap()
	readCtx, cancelRead := context.WithCancel(ctx)
	defer cancelRead()
	// Once ctx ends the acker has DrainTimeout to finish, even while the
	// mining goroutine is still blocked handing it a batch.
	stopDeadline := context.AfterFunc(ctx, func() { time.AfterFunc(r.cfg.DrainTimeout, cancelPub) })
	defer stopDeadline()

	items := make(chan *item, 4)
	r.setWaiting("")
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); defer close(r.ackerDone); r.ackLoop(pubCtx) }()
	go func() { defer wg.Done(); r.snapLoop(snapCtx) }()
	go func() { defer wg.Done(); r.readLoop(readCtx, r.st.WALSeq+1, items) }()

	fatal := r.mineLoop(ctx, items)
	if fatal != nil {
		r.log.Error("miner stopping", "err", fatal)
	}

	// Drain: stop reading, let the acker finish within the deadline.
	cancelRead()
	for range items {
	}
	close(r.inflight)
	drainCtx, cancelDrain := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.DrainTimeout)
	defer cancelDrain()
	stop := context.AfterFunc(drainCtx, cancelPub)
	defer stop()
	<-r.ackerDone
	cancelSnap()
	wg.Wait()

	acked := r.acked.Load()
	switch {
	case r.dirty:
		r.log.Warn("no final snapshot: the model holds a partly mined message", "wal_seq", r.st.WALSeq)
	case acked != r.st.WALSeq:
		r.log.Warn("no final snapshot: batches still unacked at the drain deadline", "acked", acked, "mined", r.st.WALSeq)
	case r.st.WALSeq > r.lastSnap.Load():
		if blob, err := encodeSnapshot(&r.st, r.model); err != nil {
			r.log.Error("final snapshot", "err", err)
		} else {
			r.writeSnapshot(drainCtx, snapJob{seq: r.st.WALSeq, blob: blob})
		}
	}
	r.savePosition(drainCtx, acked)
	r.log.Info("miner stopped", "acked_wal_seq", acked, "snapshot_wal_seq", r.lastSnap.Load())
	return fatal
}

// readLoop feeds WAL messages from sequence next on, decoded and tokenized,
// to out. It recreates the ordered consumer after errors and closes out when
// ctx ends.
func (r *runner) readLoop(ctx context.Context, next uint64, out chan<- *item) {
	defer close(out)
	b := backoff.New(r.cfg.retryPolicy())
	for ctx.Err() == nil {
		cons, err := r.js.OrderedConsumer(ctx, streams.WALStream, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: next,
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.setWaiting(fmt.Sprintf("waiting for WAL stream %s: %v", streams.WALStream, err))
			r.log.Warn("create ordered consumer", "start_seq", next, "err", err)
			backoff.Sleep(ctx, b.Next())
			continue
		}
		fetchBytes := r.cfg.FetchBytes
		if lim := r.maxFrame + 4096; fetchBytes < lim {
			fetchBytes = lim
		}
		it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(r.cfg.FetchMessages, fetchBytes))
		if err != nil {
			r.setWaiting(fmt.Sprintf("waiting for WAL stream %s: %v", streams.WALStream, err))
			r.log.Warn("consume WAL", "start_seq", next, "err", err)
			backoff.Sleep(ctx, b.Next())
			continue
		}
		r.setWaiting("")
		b.Reset()
		first := true
		for {
			msg, err := it.Next(jetstream.NextContext(ctx))
			if err != nil {
				it.Stop()
				if ctx.Err() == nil {
					r.log.Warn("read WAL, recreating the consumer", "next_seq", next, "err", err)
					backoff.Sleep(ctx, b.Peek())
				}
				break
			}
			md, err := msg.Metadata()
			if err != nil {
				r.log.Warn("WAL message without metadata", "subject", msg.Subject(), "err", err)
				continue
			}
			seq := md.Sequence.Stream
			if seq < next {
				continue // redelivered after a consumer reset
			}
			if seq > next && first {
				// Deleted or purged messages. Harmless for the PrevSeq chain;
				// after a restore it means the WAL was purged above the
				// snapshot and the model misses what those messages taught.
				r.log.Warn("WAL resumes after a gap", "want_seq", next, "got_seq", seq)
			}
			first = false
			in := r.prepare(msg.Subject(), seq, md.NumPending, msg.Data())
			select {
			case out <- in:
				next = seq + 1
			case <-ctx.Done():
				it.Stop()
				return
			}
		}
	}
}

// prepare decodes a WAL message, finds the records to quarantine and
// tokenizes the rest. It is pure, so it runs off the mining goroutine.
func (r *runner) prepare(subject string, seq, pendingMsgs uint64, data []byte) *item {
	in := &item{seq: seq, pending: pendingMsgs, subject: subject, data: data}
	f, err := streams.DecodeFrame(data)
	if err != nil {
		in.err = err
		return in
	}
	in.frame = f
	in.prep = make([]mining.Prepared, len(f.Records))
	for i := range f.Records {
		rec := &f.Records[i]
		if why := checkRecord(rec); why != "" {
			if in.bad == nil {
				in.bad = make([]string, len(f.Records))
			}
			in.bad[i] = why
			continue
		}
		in.prep[i] = mining.Prepare(rec.Text)
	}
	return in
}

// checkRecord says why a record cannot go to the lake, or "".
func checkRecord(rec *streams.Record) string {
	if !utf8.ValidString(rec.Text) {
		return fmt.Sprintf("text is not valid UTF-8 (first bad byte at %d)", firstInvalid(rec.Text))
	}
	for j, a := range rec.Attrs {
		if !utf8.ValidString(a.Key) {
			return fmt.Sprintf("attr %d key is not valid UTF-8", j)
		}
		if !utf8.ValidString(a.Value) {
			return fmt.Sprintf("attr %d (%s) value is not valid UTF-8", j, a.Key)
		}
	}
	return ""
}

func firstInvalid(s string) int {
	for i, c := range s {
		if c == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n <= 1 {
				return i
			}
		}
	}
	return -1
}

// mineLoop mines items in WAL order until ctx ends or items closes; it
// returns a fatal error.
func (r *runner) mineLoop(ctx context.Context, items <-chan *item) error {
	tick := time.NewTicker(min(time.Second, r.cfg.SnapshotInterval))
	defer tick.Stop()
	r.metrics.setModel(r.model.Stats())
	defer func() { r.metrics.setModel(r.model.Stats()) }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case in, ok := <-items:
			if !ok {
				return nil
			}
			if err := r.process(ctx, in); err != nil {
				if ctx.Err() != nil && !errors.Is(err, ErrBatchTooLarge) {
					// Stopped mid-message: it is replayed next time (and
					// with r.dirty set no final snapshot is written).
					return nil
				}
				return err
			}
			r.sinceSnap++
			if r.sinceSnap >= r.cfg.SnapshotEvery || time.Since(r.snapAt) >= r.cfg.SnapshotInterval {
				r.requestSnapshot()
			}
		case <-tick.C:
			r.metrics.setModel(r.model.Stats())
			if r.sinceSnap > 0 && time.Since(r.snapAt) >= r.cfg.SnapshotInterval {
				r.requestSnapshot()
			}
		}
	}
}

// requestSnapshot hands a snapshot of the current state to the snapshotter
// unless it is still busy with the previous one (then it is tried again
// after the next message).
func (r *runner) requestSnapshot() {
	if r.dirty || !r.snapBusy.CompareAndSwap(false, true) {
		return
	}
	blob, err := encodeSnapshot(&r.st, r.model)
	if err != nil {
		r.snapBusy.Store(false)
		r.metrics.snapshotErrors.Inc()
		r.log.Error("encode snapshot", "wal_seq", r.st.WALSeq, "err", err)
		return
	}
	r.snapJobs <- snapJob{seq: r.st.WALSeq, blob: blob}
	r.sinceSnap = 0
	r.snapAt = time.Now()
}

// snapLoop writes snapshots once every batch they cover is acked.
func (r *runner) snapLoop(ctx context.Context) {
	for {
		var job snapJob
		select {
		case <-ctx.Done():
			return
		case job = <-r.snapJobs:
		}
		for r.acked.Load() < job.seq {
			select {
			case <-ctx.Done():
				return
			case <-r.ackedCh:
			}
		}
		r.writeSnapshot(ctx, job)
		r.snapBusy.Store(false)
	}
}

func (r *runner) writeSnapshot(ctx context.Context, job snapJob) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.SnapshotTimeout)
	defer cancel()
	start := time.Now()
	if err := putSnapshot(ctx, r.obs, job.seq, job.blob, r.cfg.SnapshotKeep, r.log); err != nil {
		r.metrics.snapshotErrors.Inc()
		r.log.Error("write snapshot", "wal_seq", job.seq, "err", err)
		return
	}
	r.metrics.snapshotSeconds.Observe(time.Since(start).Seconds())
	crashpoint.Hit("miner.after-snapshot")
	r.lastSnap.Store(job.seq)
	r.log.Debug("snapshot written", "wal_seq", job.seq, "bytes", len(job.blob), "took", time.Since(start))
	if _, err := r.kv.Put(ctx, KeySnapshot, []byte(strconv.FormatUint(job.seq, 10))); err != nil {
		r.log.Warn("save snapshot position", "key", KeySnapshot, "err", err)
	}
}

// tenantOf picks the tenant of a WAL message that does not decode: the
// line subject's last token, else InvalidTenant.
func tenantOf(subject string) string {
	if t, ok := strings.CutPrefix(subject, "quarry.wal.lines."); ok && streams.CheckToken(t) == nil {
		return t
	}
	return InvalidTenant
}

// process mines one WAL message and publishes its batch and events.
func (r *runner) process(ctx context.Context, in *item) error {
	b := streams.MinedBatch{WALSeq: in.seq, PrevSeq: r.st.PrevSeq, Subject: in.subject}
	if in.frame == nil {
		// Dead-letter first: until it is acked nothing has changed.
		reason := fmt.Sprintf("WAL message %d does not decode: %v", in.seq, in.err)
		if err := r.deadLetter(ctx, func(ctx context.Context) error {
			return streams.DeadLetter(ctx, r.js, Stage, in.subject, in.seq, in.data, reason, nil)
		}); err != nil {
			return err
		}
		r.log.Warn("dead-lettered malformed WAL message", "wal_seq", in.seq, "subject", in.subject, "err", in.err)
		b.Tenant = tenantOf(in.subject)
		b.Quarantined = 1
		return r.finish(ctx, in, &b)
	}
	f := in.frame
	b.Tenant, b.Source, b.FirstOffset, b.NextOffset = f.Tenant, f.Source, f.FirstOffset, f.NextOffset
	for i, why := range in.bad {
		if why == "" {
			continue
		}
		if err := r.deadLetterRecord(ctx, in, i, why); err != nil {
			return err
		}
		b.Quarantined++
	}

	// Mine every record; from here on the model has changed.
	r.dirty = true
	evs := r.events[:0]
	b.Records = make([]streams.MinedRecord, 0, len(f.Records)-int(b.Quarantined))
	for i := range f.Records {
		if in.bad != nil && in.bad[i] != "" {
			continue
		}
		rec := &f.Records[i]
		var res mining.Result
		res, evs = r.model.MinePrepared(f.Tenant, in.prep[i], evs)
		b.Records = append(b.Records, streams.MinedRecord{
			Index: uint32(i), TS: rec.TS, TemplateID: res.ID, TemplateVersion: res.Version,
			Params: res.Params, Attrs: rec.Attrs,
		})
	}
	for _, e := range evs {
		var kind streams.TemplateKind
		switch e.Kind {
		case mining.EventCreated:
			kind = streams.TemplateCreated
		case mining.EventChanged:
			kind = streams.TemplateChanged
		case mining.EventMerged:
			// A merge creates no version: lines already mined keep
			// rendering with theirs. It retires e.ID into e.Into.
			kind = streams.TemplateMerged
		default:
			return fmt.Errorf("WAL seq %d: template event of unknown kind %d", in.seq, e.Kind)
		}
		b.Templates = append(b.Templates, streams.TemplateDef{
			Kind: kind, ID: e.ID, Tenant: e.Tenant, Version: e.Version, Text: e.Template, Previous: e.Previous, Into: e.Into,
		})
	}
	clear(evs)
	r.events = evs[:0]
	if err := r.finish(ctx, in, &b); err != nil {
		return err
	}
	r.dirty = false
	return nil
}

// finish encodes and publishes the batch and its template events and
// advances the state.
func (r *runner) finish(ctx context.Context, in *item, b *streams.MinedBatch) error {
	data := streams.AppendMinedBatch(nil, b)
	if len(data) > r.maxBatch {
		return fmt.Errorf("%w: WAL seq %d (%s, %d records) mines to %d bytes, the work queue takes %d: raise streams.max_msg_size or lower the producer's frame size",
			ErrBatchTooLarge, in.seq, in.subject, len(b.Records), len(data), r.maxBatch)
	}
	p := &pending{seq: in.seq, at: time.Now()}
	for i := range b.Templates {
		t := &b.Templates[i]
		ev := streams.TemplateEvent{Kind: t.Kind.String(), ID: t.ID, Tenant: t.Tenant, Version: t.Version,
			Template: t.Text, Previous: t.Previous, Into: t.Into, WALSeq: in.seq}
		js, err := json.Marshal(&ev)
		if err != nil {
			return fmt.Errorf("encode template event %d/%d: %w", t.ID, t.Version, err)
		}
		msg := nats.NewMsg(streams.TemplateSubject(t.Tenant))
		id := streams.TemplateMsgID(t.ID, t.Version)
		if t.Kind == streams.TemplateMerged {
			id = streams.TemplateMergeMsgID(t.ID, t.Into)
		}
		msg.Header.Set(streams.HeaderMsgID, id)
		msg.Header.Set(streams.HeaderFormat, streams.FormatTemplate)
		msg.Data = js
		p.msgs = append(p.msgs, msg)
	}
	msg := nats.NewMsg(streams.MinedSubject(b.Tenant))
	msg.Header.Set(streams.HeaderMsgID, streams.MinedMsgID(in.seq))
	msg.Header.Set(streams.HeaderFormat, streams.FormatMined)
	msg.Data = data
	p.msgs = append(p.msgs, msg)
	p.futs = make([]jetstream.PubAckFuture, len(p.msgs))
	for i, msg := range p.msgs {
		fut, err := r.js.PublishMsgAsync(msg)
		if err != nil {
			r.log.Debug("async publish refused, the acker publishes it", "subject", msg.Subject, "err", err)
			continue
		}
		p.futs[i] = fut
	}
	r.inFlight.Add(1)
	r.metrics.inFlight.Inc()
	select {
	case r.inflight <- p:
	case <-r.ackerDone:
		return fmt.Errorf("publish WAL seq %d: acker stopped", in.seq)
	}

	// Advance the state.
	st := &r.st
	st.WALSeq, st.PrevSeq = in.seq, in.seq
	st.Frames++
	st.Records += uint64(len(b.Records))
	st.Quarantined += uint64(b.Quarantined)
	tc := st.Tenants[b.Tenant]
	if tc == nil {
		tc = &TenantCounters{}
		st.Tenants[b.Tenant] = tc
	}
	tc.Frames++
	tc.Records += uint64(len(b.Records))
	tc.Quarantined += uint64(b.Quarantined)
	m := r.metrics
	m.frames.Inc()
	m.records.Add(float64(len(b.Records)))
	m.quarantined.Add(float64(b.Quarantined))
	m.walLag.Set(float64(in.pending))
	for i := range b.Templates {
		m.templateEvents.WithLabelValues(b.Templates[i].Kind.String()).Inc()
	}
	return nil
}

// deadLetter retries fn until it succeeds or ctx ends.
func (r *runner) deadLetter(ctx context.Context, fn func(context.Context) error) error {
	blocked := false
	err := backoff.Retry(ctx, r.cfg.retryPolicy(), func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
		defer cancel()
		return fn(cctx)
	}, func(err error, wait time.Duration) {
		if !blocked {
			blocked = true
			r.setWaiting(fmt.Sprintf("dead-lettering blocked since %s: %v", time.Now().UTC().Format(time.RFC3339), err))
		}
		r.log.Warn("dead-letter, retrying", "err", err, "backoff", wait)
	})
	if blocked {
		r.setWaiting("")
	}
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// deadLetterRecord sends record i of in's frame to the dead-letter stream as
// a one-record frame/1 (source, tenant, offsets, ts, text and attrs kept).
func (r *runner) deadLetterRecord(ctx context.Context, in *item, i int, why string) error {
	f := in.frame
	one := streams.Frame{Source: f.Source, Tenant: f.Tenant, FirstOffset: f.FirstOffset, NextOffset: f.NextOffset,
		Records: f.Records[i : i+1]}
	payload := streams.AppendFrame(nil, &one)
	hdr := nats.Header{}
	hdr.Set(streams.HeaderFormat, streams.FormatFrame)
	hdr.Set(streams.HeaderSource, f.Source)
	hdr.Set(streams.HeaderOrigSeq, strconv.FormatUint(in.seq, 10))
	hdr.Set(HeaderRecordIndex, strconv.Itoa(i))
	// streams.DeadLetter derives the Nats-Msg-Id from the WAL sequence
	// only when it is given one; records of one frame need their own.
	hdr.Set(streams.HeaderMsgID, fmt.Sprintf("dlq-%s-%d-%d", Stage, in.seq, i))
	reason := fmt.Sprintf("WAL seq %d record %d: %s", in.seq, i, why)
	if err := r.deadLetter(ctx, func(ctx context.Context) error {
		return streams.DeadLetter(ctx, r.js, Stage, in.subject, 0, payload, reason, hdr)
	}); err != nil {
		return err
	}
	r.log.Warn("dead-lettered record", "wal_seq", in.seq, "index", i, "tenant", f.Tenant, "source", f.Source, "reason", why)
	return nil
}

// ackLoop waits for the acks of the in-flight publishes in WAL order,
// retrying what fails, and advances the acked position.
func (r *runner) ackLoop(ctx context.Context) {
	tick := time.NewTicker(r.cfg.PositionInterval)
	defer tick.Stop()
	saved := r.acked.Load()
	savePos := func() {
		if seq := r.acked.Load(); seq != saved {
			r.savePosition(ctx, seq)
			saved = seq
		}
	}
	defer func() {
		r.oldestPending.Store(0)
		if ctx.Err() == nil {
			savePos()
		}
	}()
	for {
		var p *pending
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			savePos()
			continue
		case p = <-r.inflight:
			if p == nil {
				return // closed: every publish is acked
			}
		}
		r.oldestPending.Store(p.at.UnixNano())
		for i, msg := range p.msgs {
			if !r.await(ctx, msg, p.futs[i]) {
				return
			}
		}
		if r.blockedSince.Load() != 0 {
			r.log.Info("publishing resumed", "wal_seq", p.seq,
				"blocked_for", time.Since(time.Unix(0, r.blockedSince.Load())).Round(time.Millisecond))
			r.blockedSince.Store(0)
			r.blockedErr.Store(nil)
		}
		r.acked.Store(p.seq)
		r.inFlight.Add(-1)
		r.metrics.inFlight.Dec()
		r.metrics.position.Set(float64(p.seq))
		select {
		case r.ackedCh <- struct{}{}:
		default:
		}
		if len(r.inflight) == 0 {
			r.oldestPending.Store(0)
		}
	}
}

// await returns once msg is acked, or false when ctx ends. A publish that
// failed or stays unanswered is republished at once with the same
// Nats-Msg-Id (JetStream drops it if the first one was stored after all),
// then with backoff while it keeps failing.
func (r *runner) await(ctx context.Context, msg *nats.Msg, fut jetstream.PubAckFuture) bool {
	var err error
	if fut != nil {
		t := time.NewTimer(r.cfg.PublishTimeout)
		select {
		case <-fut.Ok():
			t.Stop()
			return true
		case err = <-fut.Err():
		case <-t.C:
			err = fmt.Errorf("no ack after %s", r.cfg.PublishTimeout)
		case <-ctx.Done():
			t.Stop()
			return false
		}
		t.Stop()
	} else {
		err = errors.New("async publish refused")
	}
	id := msg.Header.Get(streams.HeaderMsgID)
	r.log.Debug("publish not acked, republishing", "subject", msg.Subject, "msg_id", id, "err", err)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			// The backoff carries over from one message to the next while
			// publishing fails, so an outage costs one backoff per attempt,
			// not one per message.
			if r.blockedSince.Load() == 0 {
				r.blockedSince.Store(time.Now().UnixNano())
			}
			s := fmt.Sprintf("publish %s %s: %v", msg.Subject, id, err)
			r.blockedErr.Store(&s)
			if time.Since(r.pubWarned) >= 5*time.Second {
				r.pubWarned = time.Now()
				r.log.Warn("publish failed, retrying", "subject", msg.Subject, "msg_id", id, "err", err, "backoff", r.pubBackoff.Peek())
			}
			if r.pubBackoff.Wait(ctx) != nil {
				return false
			}
		}
		r.metrics.publishRetries.Inc()
		cctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
		_, err = r.js.PublishMsg(cctx, msg)
		cancel()
		if err == nil {
			r.pubBackoff.Reset()
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
}

// savePosition writes the acked WAL sequence to KV (informational).
func (r *runner) savePosition(ctx context.Context, seq uint64) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := r.kv.Put(ctx, streams.KeyMiner, []byte(strconv.FormatUint(seq, 10))); err != nil {
		r.log.Warn("save position", "key", streams.KeyMiner, "wal_seq", seq, "err", err)
	}
}
