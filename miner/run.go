package miner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/streams"
)

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
	// records is the array a batch's records are built in (process),
	// cleared once the batch is encoded.
	records []streams.MinedRecord
	// acker only
	pubBackoff *backoff.Backoff // carries over between messages while publishing fails
	pubWarned  time.Time
	dirty      bool // the model holds a partly processed message: no snapshot
	sinceSnap  int
	snapAt     time.Time
}

type snapJob struct {
	seq  uint64
	blob []byte
}

// start restores the newest snapshot and looks up the limits.
func (r *runner) start(ctx context.Context) error {
	r.setWaiting("restoring snapshot")
	if err := r.retry(ctx, "snapshot store "+streams.SnapshotBucket, r.cfg.OpTimeout, func(ctx context.Context) (err error) {
		r.obs, err = r.js.ObjectStore(ctx, streams.SnapshotBucket)
		return err
	}); err != nil {
		return err
	}
	if err := r.retry(ctx, "key-value bucket "+streams.PositionsBucket, r.cfg.OpTimeout, func(ctx context.Context) (err error) {
		r.kv, err = r.js.KeyValue(ctx, streams.PositionsBucket)
		return err
	}); err != nil {
		return err
	}
	var st *State
	var model *mining.Model
	var fatal error
	if err := r.retry(ctx, "snapshots", r.cfg.SnapshotTimeout, func(ctx context.Context) (err error) {
		st, model, err = loadNewest(ctx, r.js, r.obs, r.cfg.Mining, r.cfg.OpTimeout, r.log, r.metrics.snapshotSkipped.Inc)
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
	if err := r.retry(ctx, "streams", r.cfg.OpTimeout, func(ctx context.Context) error {
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
