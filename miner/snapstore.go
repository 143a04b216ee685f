package miner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/crashpoint"
	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/streams"
)

// snapshotNames lists the miner snapshots in streams.SnapshotBucket,
// newest first.
func snapshotNames(ctx context.Context, js jetstream.JetStream) ([]string, error) {
	objs, err := streams.ListSnapshots(ctx, js)
	if err != nil {
		return nil, err
	}
	type named struct {
		name string
		seq  uint64
	}
	var ns []named
	for _, o := range objs {
		if o.Deleted {
			continue
		}
		if seq, ok := streams.ParseSnapshotName(o.Name); ok {
			ns = append(ns, named{o.Name, seq})
		}
	}
	slices.SortFunc(ns, func(a, b named) int { return -cmpU64(a.seq, b.seq) })
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.name
	}
	return out, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// loadNewest restores the newest snapshot that decodes. A snapshot that
// does not read or decode is skipped with a warning and the next older one
// is tried. No snapshot at all gives (nil, nil, nil): start from scratch;
// snapshots of which none restores give ErrNoUsableSnapshot.
func loadNewest(ctx context.Context, js jetstream.JetStream, obs jetstream.ObjectStore, cfg mining.Config, opTimeout time.Duration, log *slog.Logger, onSkip func()) (*State, *mining.Model, error) {
	lctx, cancel := context.WithTimeout(ctx, opTimeout)
	names, err := snapshotNames(lctx, js)
	cancel()
	if err != nil {
		return nil, nil, err
	}
	for _, name := range names {
		blob, err := readObject(ctx, obs, name, snapshotReadIdle)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, errReadIdle) {
				// Not the snapshot's fault: the caller retries, from the
				// newest snapshot again.
				return nil, nil, fmt.Errorf("read snapshot %s: %w", name, err)
			}
			log.Warn("skip unreadable snapshot", "name", name, "err", err)
			onSkip()
			continue
		}
		st, mb, err := DecodeSnapshot(blob)
		if err != nil {
			log.Warn("skip corrupt snapshot", "name", name, "err", err)
			onSkip()
			continue
		}
		if seq, _ := streams.ParseSnapshotName(name); seq != st.WALSeq {
			log.Warn("skip snapshot whose name and content disagree", "name", name, "wal_seq", st.WALSeq)
			onSkip()
			continue
		}
		model, err := mining.Restore(cfg, bytes.NewReader(mb))
		if err != nil {
			log.Warn("skip snapshot whose model does not restore", "name", name, "err", err)
			onSkip()
			continue
		}
		if want := miningConfigJSON(cfg); st.MiningConfig != want {
			log.Warn("mining config changed since the snapshot: ids after it may differ from the run that wrote it",
				"name", name, "snapshot_config", st.MiningConfig, "config", want)
		}
		return st, model, nil
	}
	if len(names) > 0 {
		return nil, nil, fmt.Errorf("%w: %d snapshots in %s (newest %s) and none restores; starting over would reuse template ids",
			ErrNoUsableSnapshot, len(names), streams.SnapshotBucket, names[0])
	}
	return nil, nil, nil
}

// putSnapshot stores blob under streams.SnapshotName(seq) and deletes all but the
// newest keep snapshots.
func putSnapshot(ctx context.Context, js jetstream.JetStream, obs jetstream.ObjectStore, seq uint64, blob []byte, keep int, log *slog.Logger) error {
	name := streams.SnapshotName(seq)
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name, Description: "quarry miner snapshot"}, bytes.NewReader(blob)); err != nil {
		return fmt.Errorf("put snapshot %s: %w", name, err)
	}
	names, err := snapshotNames(ctx, js)
	if err != nil {
		log.Warn("list snapshots to prune", "err", err)
		return nil
	}
	for i, n := range names {
		if i < keep || n == name {
			continue
		}
		if err := obs.Delete(ctx, n); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			log.Warn("delete old snapshot", "name", n, "err", err)
		}
	}
	return nil
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
	if err := putSnapshot(ctx, r.js, r.obs, job.seq, job.blob, r.cfg.SnapshotKeep, r.log); err != nil {
		r.metrics.snapshotErrors.Inc()
		r.log.Error("write snapshot", "wal_seq", job.seq, "err", err)
		return
	}
	// The old snapshots just deleted (and any a crash left behind) leave
	// delete markers under their unique names: drop them, so the bucket
	// holds only the snapshots kept.
	if _, err := streams.DropSnapshotDeleteMarkers(ctx, r.js); err != nil {
		r.log.Warn("drop snapshot delete markers", "err", err)
	}
	r.metrics.snapshotSeconds.Observe(time.Since(start).Seconds())
	crashpoint.Hit("miner.after-snapshot")
	r.lastSnap.Store(job.seq)
	r.log.Debug("snapshot written", "wal_seq", job.seq, "bytes", len(job.blob), "took", time.Since(start))
	if _, err := r.kv.Put(ctx, KeySnapshot, []byte(strconv.FormatUint(job.seq, 10))); err != nil {
		r.log.Warn("save snapshot position", "key", KeySnapshot, "err", err)
	}
}

// snapshotReadIdle is how long a snapshot read may go without a byte.
var snapshotReadIdle = 30 * time.Second

// errReadIdle: an object read that stopped delivering bytes.
var errReadIdle = errors.New("object read stalled")

// readObject reads an object whole. nats.go's ObjectStore.GetBytes waits
// for the object's chunks without watching its context, so a server that
// restarts mid-read leaves it waiting for ever; here the read is closed
// when ctx ends or when no byte arrived for idle. The watch starts before
// the object's info is asked for (Get), whose reply a restart can lose as
// well: then Get's context is cancelled after idle.
func readObject(ctx context.Context, obs jetstream.ObjectStore, name string, idle time.Duration) ([]byte, error) {
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stalled atomic.Bool
	var mu sync.Mutex
	var res jetstream.ObjectResult // set once Get returns; under mu
	closeRes := func() {
		mu.Lock()
		defer mu.Unlock()
		if res != nil {
			res.Close()
		}
	}
	progress := make(chan struct{}, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTimer(idle)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				closeRes()
				return
			case <-progress:
				t.Reset(idle)
			case <-t.C:
				stalled.Store(true)
				cancel()
				closeRes()
				return
			}
		}
	}()
	r, err := obs.Get(gctx, name)
	if err != nil {
		if stalled.Load() {
			return nil, fmt.Errorf("%w: no answer for %s", errReadIdle, idle)
		}
		return nil, err
	}
	mu.Lock()
	res = r
	mu.Unlock()
	if stalled.Load() { // the watch fired before res was set
		r.Close()
		return nil, fmt.Errorf("%w: no answer for %s", errReadIdle, idle)
	}
	var buf bytes.Buffer
	chunk := make([]byte, 64<<10)
	for {
		n, err := r.Read(chunk)
		buf.Write(chunk[:n])
		if n > 0 {
			select {
			case progress <- struct{}{}:
			default:
			}
		}
		if err == io.EOF {
			return buf.Bytes(), r.Error()
		}
		if err != nil {
			if stalled.Load() {
				return nil, fmt.Errorf("%w: no byte for %s", errReadIdle, idle)
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
	}
}
