package cdc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/quarrylake/quarry/producer/sqlserver"
)

func (s *Stream) isolation() sqlserver.SnapshotIsolation {
	return sqlserver.SnapshotIsolation(s.cfg.SnapshotIsolation)
}

// beginSnapshot marks a snapshot as due; snapshot opens it (and takes its
// LSN) at the next cycle.
func (s *Stream) beginSnapshot(context.Context) error {
	if len(s.plan.ci.KeyColumns) == 0 {
		return fatal(fmt.Errorf("cdc %s: bootstrap %s: %w (set bootstrap: never)", s.name, s.tcfg.Bootstrap, sqlserver.ErrNoKey))
	}
	s.closeSnap()
	s.read.Snapshot = &snapState{}
	s.read.Pos = sqlserver.Position{}
	return nil
}

func (s *Stream) closeSnap() {
	if s.snap == nil {
		return
	}
	if err := s.snap.Close(); err != nil {
		s.log.Warn("cdc snapshot close", "err", err)
	}
	s.snap = nil
}

// openSnapshot opens the snapshot handle for s.read.Snapshot. At snapshot
// isolation a snapshot begun before (by an earlier process or before a
// SQL error) cannot be continued: it starts again at the new LSN, after
// the records already published. At read committed a saved snapshot
// resumes after its last key at its LSN.
func (s *Stream) openSnapshot(ctx context.Context) error {
	iso := s.isolation()
	h, err := s.deps.Source.BeginSnapshot(ctx, s.plan.ci, iso)
	if err != nil {
		if errors.Is(err, sqlserver.ErrSnapshotIsolation) {
			return fatal(fmt.Errorf("cdc %s: %w", s.name, err))
		}
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	sn := s.read.Snapshot
	if iso == sqlserver.IsolationReadCommitted && !sn.LSN.IsZero() {
		at, err := s.deps.Source.CommitTime(ctx, sn.LSN)
		if err != nil {
			h.Close()
			return fmt.Errorf("cdc %s: %w", s.name, err)
		}
		s.snap, s.snapAt = h, at
		s.log.Info("cdc snapshot resuming", "lsn", sn.LSN, "rows", sn.Rows, "isolation", iso)
		return nil
	}
	if !sn.LSN.IsZero() {
		s.log.Warn("cdc snapshot starting again at a new lsn (a snapshot transaction cannot be resumed)",
			"old_lsn", sn.LSN, "rows_published", sn.Rows, "lsn", h.LSN())
	} else {
		s.log.Info("cdc snapshot starting", "lsn", h.LSN(), "isolation", iso)
	}
	s.snap, s.snapAt = h, h.CommitTime()
	s.read.Snapshot = &snapState{LSN: h.LSN()}
	return nil
}

// snapshot reads the table in key-ordered chunks until done, through the
// snapshot handle (opened here if needed, closed when done or on a SQL
// error).
func (s *Stream) snapshot(ctx context.Context) error {
	s.setReady(errors.New("snapshotting"))
	s.startOnce.Do(func() { close(s.started) })
	if s.snap != nil && s.isolation() == sqlserver.IsolationSnapshot {
		switch sn := s.read.Snapshot; {
		case sn.LSN.IsZero() && sn.After == nil:
			// Rewound to before the first acked frame: same handle, from
			// the start.
			sn.LSN = s.snap.LSN()
		case sn.LSN != s.snap.LSN():
			s.closeSnap()
		}
	}
	if s.snap == nil {
		if err := s.openSnapshot(ctx); err != nil {
			return err
		}
	}
	sn := s.read.Snapshot
	after, err := sqlserver.DecodeKey(sn.After)
	if err != nil {
		return fatal(fmt.Errorf("cdc %s: saved snapshot key: %w", s.name, err))
	}
	if sn.After == nil {
		after = nil
	}
	at := s.snapAt
	pos := sqlserver.Position{LSN: sn.LSN, Op: sqlserver.OpSnapshot}
	for {
		if err := s.takePubErr(); err != nil {
			return err
		}
		rows, err := s.snap.Chunk(ctx, after, s.cfg.SnapshotChunk)
		if err != nil {
			s.closeSnap()
			return fmt.Errorf("cdc %s: %w", s.name, err)
		}
		for i := range rows {
			r := &rows[i]
			kp, err := sqlserver.EncodeKey(r.Key)
			if err != nil {
				return fatal(fmt.Errorf("cdc %s: snapshot key: %w", s.name, err))
			}
			rec := s.plan.record(s.tcfg, at, sqlserver.OpSnapshot, pos, r.Values)
			kt := snapKeyText(kp)
			// The frame cut happens inside add, before this row: the state
			// it installs is the one of the previous row.
			if err := s.add(ctx, rec, kt); err != nil {
				return err
			}
			s.read.Snapshot.After = kp
			s.read.Snapshot.Rows++
			after = r.Key
		}
		if len(rows) < s.cfg.SnapshotChunk {
			break
		}
	}
	s.closeSnap()
	if err := s.flushFrame(ctx); err != nil {
		return err
	}
	// Done: stream from the snapshot LSN. The state goes with the next ack
	// or the next heartbeat.
	s.log.Info("cdc snapshot done", "lsn", sn.LSN, "rows", s.read.Snapshot.Rows)
	s.read.Snapshot = nil
	s.read.Pos = sqlserver.Through(sn.LSN)
	if !at.IsZero() {
		s.read.LastCommit = at
	}
	return nil
}

func snapKeyText(kp []sqlserver.KeyPart) string {
	b, _ := json.Marshal(kp)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}
