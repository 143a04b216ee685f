package cdc

import (
	"context"
	"fmt"

	"github.com/quarrylake/quarry/producer/internal/walfloor"
	"github.com/quarrylake/quarry/streams"
)

// startFloor warns when the WAL was purged past the floor a crashed run
// left (its frames beyond the saved state may be gone: recoverFromWAL
// cannot find them and their changes may be written twice), then puts the
// floor at the saved state, so that frames recovered or published from
// now on are covered until a later state is saved.
func (s *Stream) startFloor(ctx context.Context, savedSeq uint64) error {
	s.floor = walfloor.New(s.positions, s.progressSource())
	if wal, err := s.deps.JS.Stream(ctx, streams.WALStream); err == nil {
		first := wal.CachedInfo().State.FirstSeq
		if lost, ok := s.floor.Check(ctx, first); ok {
			s.m.unverified.WithLabelValues(s.name).Inc()
			s.log.Warn("wal purged past this stream's floor: changes after the saved position may be written twice",
				"floor", lost.Floor, "wal_first_seq", first, "floor_saved_at", lost.SavedAt)
		}
	}
	s.floorBase.Store(savedSeq)
	if err := s.floor.Start(ctx, savedSeq+1); err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	return nil
}

// holdFloor puts the floor back, if an idle save released it, before a
// frame is published: every frame lands above the saved state.
func (s *Stream) holdFloor(ctx context.Context) error {
	if err := s.floor.Hold(ctx, s.floorBase.Load()+1); err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	return nil
}

// syncFloor runs after a save. Idle (no frame in flight, no acked frame
// beyond the saved state, no failed publish): the floor is released, as
// a restart reads nothing back and a quiet table must not hold the WAL
// purge. Otherwise it is refreshed at the saved state.
func (s *Stream) syncFloor(ctx context.Context, saved *state) error {
	if saved != nil {
		for {
			b := s.floorBase.Load()
			if saved.WALSeq <= b || s.floorBase.CompareAndSwap(b, saved.WALSeq) {
				break
			}
		}
	}
	base := s.floorBase.Load()
	err := s.floor.Sync(ctx, base+1, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		// A state change without frames (a heartbeat moving the position
		// of a quiet table) puts nothing in the WAL beyond the saved WAL
		// sequence, so it does not hold the floor.
		return s.pubErr == nil && s.acked.WALSeq <= base
	})
	if err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	return nil
}
