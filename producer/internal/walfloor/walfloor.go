// Package walfloor is the one implementation of a producer source's WAL
// floor, shared by the line sources (package producer) and the CDC streams
// (package producer/cdc). The committer purges the WAL only below every
// floor (docs/architecture.md, "Crash matrix"), so the purge's
// safety rests on every source keeping the rules of Floor.
package walfloor

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/streams"
)

// kvTimeout bounds one floor put or delete whose caller set no deadline.
const kvTimeout = 10 * time.Second

// Floor is one source's WAL floor: the key streams.FloorKey(source) in the
// positions bucket, holding the lowest WAL sequence a restart of the source
// may have to read back (its frames beyond its saved position). A source
// keeps these rules:
//
//  1. Start: before the first frame of a run, put the floor at or below the
//     lowest sequence a restart may need, frames an earlier run left beyond
//     the saved position included.
//  2. Hold: before publishing a frame, record a lower bound of the WAL
//     sequence it will get (a sequence above every one this source saw
//     acked, or above the saved position's). If an idle Sync released the
//     key, it is put back first, at that bound: no frame is ever published
//     without a floor in place.
//  3. Done: once the frame's ack callback has counted it in the acked
//     position (or failed the source), forget its bound, oldest first.
//     Drop forgets the newest bound, of a frame that was not published
//     after all.
//  4. Sync, after each save of the position: with value, the floor read
//     before the position was read (a frame acked in between only makes it
//     lower than needed, never higher). Idle (no frame held, and the caller
//     reports nothing acked beyond the saved position, no failed publish,
//     no recovered frame left uncovered): the key is deleted, as a restart
//     reads nothing back and a quiet source must not hold the purge for
//     ever. Otherwise the key is put at value, never above the bound of the
//     oldest frame held.
//  5. Check, on start: a floor below the WAL's first sequence means the WAL
//     was purged past the frames a crashed run left beyond its saved
//     position (the committer ignores floors older than its floor_max_age):
//     they cannot be found and skipped, so their records may be written a
//     second time.
//
// The idle decision and the delete run under the lock Hold takes, so a
// frame published meanwhile either prevents the release or puts the floor
// back before it is published. A Floor is safe for concurrent use; Hold,
// Done and Drop follow the publish order of one goroutine.
type Floor struct {
	kv  jetstream.KeyValue
	key string

	mu   sync.Mutex
	held bool     // the key is in place (not released while idle)
	lbs  []uint64 // bounds of the frames held, in publish order
}

// New returns the floor of source in kv (the positions bucket). It writes
// nothing until Start.
func New(kv jetstream.KeyValue, source string) *Floor {
	return &Floor{kv: kv, key: streams.FloorKey(source)}
}

// Key is the floor's KV key.
func (f *Floor) Key() string { return f.key }

// Start puts the floor at seq before the first frame of a run (rule 1).
func (f *Floor) Start(ctx context.Context, seq uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.put(ctx, seq); err != nil {
		return err
	}
	f.held = true
	return nil
}

// Hold records lb, a lower bound of the WAL sequence of the frame about to
// be published, putting the floor back at lb first if it was released
// (rule 2). The frame must not be published when Hold fails.
func (f *Floor) Hold(ctx context.Context, lb uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.held {
		if err := f.put(ctx, lb); err != nil {
			return err
		}
		f.held = true
	}
	f.lbs = append(f.lbs, lb)
	return nil
}

// Done forgets the bound of the oldest frame held: its ack callback has
// counted it in the acked position or failed the source (rule 3).
func (f *Floor) Done() {
	f.mu.Lock()
	if len(f.lbs) > 0 {
		f.lbs = f.lbs[1:]
	}
	f.mu.Unlock()
}

// Drop forgets the bound of the newest frame held: Hold succeeded but the
// frame was not published.
func (f *Floor) Drop() {
	f.mu.Lock()
	if len(f.lbs) > 0 {
		f.lbs = f.lbs[:len(f.lbs)-1]
	}
	f.mu.Unlock()
}

// Lowest is the bound of the oldest frame held, or none when no frame is.
func (f *Floor) Lowest(none uint64) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.lbs) > 0 {
		return f.lbs[0]
	}
	return none
}

// Sync runs after a save of the position (rule 4): with no frame held and
// idle() true it releases the floor, otherwise it puts it at value (or the
// oldest held frame's bound, if lower). idle runs under the floor's lock.
func (f *Floor) Sync(ctx context.Context, value uint64, idle func() bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.lbs) == 0 && idle() {
		if !f.held {
			return nil
		}
		dctx, cancel := backoff.WithTimeout(ctx, kvTimeout)
		defer cancel()
		if err := f.kv.Delete(dctx, f.key); err != nil {
			return fmt.Errorf("release wal floor %s: %w", f.key, err)
		}
		f.held = false
		return nil
	}
	if len(f.lbs) > 0 {
		value = min(value, f.lbs[0])
	}
	if err := f.put(ctx, value); err != nil {
		return err
	}
	f.held = true
	return nil
}

// Held reports whether the floor key is in place.
func (f *Floor) Held() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held
}

// Lost is what Check found: a floor the WAL was purged past.
type Lost struct {
	Floor   uint64    // the floor a crashed run left
	SavedAt time.Time // when it was put
}

// Check reads the floor an earlier run left and reports whether the WAL,
// whose first sequence is walFirst, was purged past it (rule 5). No floor
// (the last run stopped cleanly or never published) or one that cannot be
// read is not lost.
func (f *Floor) Check(ctx context.Context, walFirst uint64) (Lost, bool) {
	e, err := f.kv.Get(ctx, f.key)
	if err != nil {
		return Lost{}, false
	}
	v, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil || v >= walFirst {
		return Lost{}, false
	}
	return Lost{Floor: v, SavedAt: e.Created()}, true
}

func (f *Floor) put(ctx context.Context, seq uint64) error {
	pctx, cancel := backoff.WithTimeout(ctx, kvTimeout)
	defer cancel()
	if _, err := f.kv.Put(pctx, f.key, []byte(strconv.FormatUint(seq, 10))); err != nil {
		return fmt.Errorf("save wal floor %s=%d: %w", f.key, seq, err)
	}
	return nil
}
