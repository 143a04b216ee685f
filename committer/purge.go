package committer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/streams"
)

// purge trims the WAL and the report stream after an advance, as configured.
// Failures are logged: the next advance tries again.
func (c *Committer) purge(ctx context.Context, ts *termState) {
	if c.cfg.purgeReports() {
		if below := ts.arb.purgeBefore(); below > 0 {
			cctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
			err := c.purgeStream(cctx, streams.ReportStream, below)
			cancel()
			if err != nil {
				c.log.Warn("purge reports", "err", err)
			} else {
				ts.arb.purged(below)
			}
		}
	}
	if c.cfg.purgeWAL() {
		cctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
		defer cancel()
		snap, err := oldestSnapshot(cctx, c.js)
		if err != nil {
			c.log.Warn("purge wal: miner snapshots", "err", err)
			return
		}
		floor, err := producerFloor(cctx, c.js, c.cfg.FloorMaxAge)
		if err != nil {
			c.log.Warn("purge wal: producer floors", "err", err)
			return
		}
		safe := min(ts.arb.hw, snap) + 1
		if floor > 0 && floor < safe {
			safe = floor // a producer's restart may need to read back frames from there
		}
		if safe <= max(ts.walPurged, 1) {
			return
		}
		if err := c.purgeStream(cctx, streams.WALStream, safe); err != nil {
			c.log.Warn("purge wal", "err", err)
			return
		}
		ts.walPurged = safe
		c.log.Debug("wal purged", "below", safe)
	}
}

func (c *Committer) purgeStream(ctx context.Context, name string, below uint64) error {
	s, err := c.js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(below)); err != nil {
		return fmt.Errorf("purge %s below %d: %w", name, below, err)
	}
	return nil
}

// producerFloor is the lowest WAL floor (streams.FloorKey) a producer
// updated within maxAge, 0 when there is none. The WAL is never purged at or
// above it: those are frames a producer published after its saved position,
// which its restart reads back so as not to publish them twice.
func producerFloor(ctx context.Context, js jetstream.JetStream, maxAge time.Duration) (uint64, error) {
	kv, err := js.KeyValue(ctx, streams.PositionsBucket)
	if err != nil {
		return 0, fmt.Errorf("bucket %s: %w", streams.PositionsBucket, err)
	}
	lister, err := kv.ListKeysFiltered(ctx, streams.FloorPrefix+">")
	if err != nil {
		return 0, fmt.Errorf("list %s floors: %w", streams.PositionsBucket, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	var floor uint64
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("floor %s: %w", k, err)
		}
		if time.Since(e.Created()) > maxAge {
			continue
		}
		v, err := strconv.ParseUint(string(e.Value()), 10, 64)
		if err != nil {
			continue // not a floor this committer understands; it only holds nothing back
		}
		if floor == 0 || v < floor {
			floor = v
		}
	}
	return floor, nil
}

// oldestSnapshot is the WAL sequence of the oldest miner snapshot
// (streams.SnapshotName in streams.SnapshotBucket) still stored, 0 when there
// is none. The WAL is purged below it, not below the newest: a miner whose
// newest snapshot is corrupt falls back to an older one and replays the WAL
// from there, so every retained snapshot must stay restorable. Snapshots
// only get newer, so a sequence read here stays safe after the miner
// deletes old ones.
func oldestSnapshot(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	objs, err := streams.ListSnapshots(ctx, js)
	if err != nil {
		return 0, err
	}
	var oldest uint64
	for _, o := range objs {
		if seq, ok := streams.ParseSnapshotName(o.Name); ok && !o.Deleted && (oldest == 0 || seq < oldest) {
			oldest = seq
		}
	}
	return oldest, nil
}
