package cdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/producer/sqlserver"
	"github.com/quarrylake/quarry/streams"
)

// PositionKey is the KV key of a capture instance's position.
func PositionKey(database, ci string) string { return "cdc." + database + "." + ci }

// snapState is the progress of a snapshot in a saved state.
type snapState struct {
	LSN   sqlserver.LSN       `json:"lsn"`
	After []sqlserver.KeyPart `json:"after,omitempty"`
	Rows  uint64              `json:"rows"`
}

// state is the saved position of a capture instance (KV value, JSON).
type state struct {
	V               int                `json:"v"`
	CaptureInstance string             `json:"capture_instance"`
	Pos             sqlserver.Position `json:"position"`
	Rows            uint64             `json:"rows"`
	Frames          uint64             `json:"frames"`
	WALSeq          uint64             `json:"wal_seq"`
	LastCommit      time.Time          `json:"last_commit,omitzero"`
	Snapshot        *snapState         `json:"snapshot,omitempty"`
	Successor       string             `json:"successor,omitempty"`
	UpdatedAt       time.Time          `json:"updated_at"`
}

func (st state) clone() state {
	if st.Snapshot != nil {
		sn := *st.Snapshot
		sn.After = append([]sqlserver.KeyPart(nil), sn.After...)
		st.Snapshot = &sn
	}
	return st
}

func (s *Stream) loadState(ctx context.Context, ci string) (state, bool, error) {
	e, err := s.positions.Get(ctx, s.source(ci))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return state{}, false, nil
	}
	if err != nil {
		return state{}, false, fmt.Errorf("cdc %s: load position %s: %w", s.name, s.source(ci), err)
	}
	var st state
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return state{}, false, fatal(fmt.Errorf("cdc %s: position %s does not decode: %w", s.name, s.source(ci), err))
	}
	return st, true, nil
}

// recoverFromWAL advances st past frames of its subject that are in the
// WAL after st.WALSeq and continue st's record count (published and
// stored, but the crash came before the position was saved). Snapshot
// frames: at snapshot isolation the snapshot starts again anyway, so st
// counts them and goes on (a later change frame means the snapshot was
// done); at read committed it stops there, to resume after the saved key
// (the message ids drop the frames published again).
func (s *Stream) recoverFromWAL(ctx context.Context, st *state) error {
	wal, err := s.deps.JS.Stream(ctx, streams.WALStream)
	if err != nil {
		return fmt.Errorf("cdc %s: stream %s: %w", s.name, streams.WALStream, err)
	}
	subj := s.subject(st.CaptureInstance)
	seq := st.WALSeq + 1
	for i := 0; i < 4*s.cfg.Publisher.MaxInFlight+16; i++ {
		msg, err := wal.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cdc %s: read back %s after %d: %w", s.name, subj, seq-1, err)
		}
		seq = msg.Sequence + 1
		f, err := streams.DecodeFrame(msg.Data)
		if err != nil || f.Source != s.source(st.CaptureInstance) {
			continue
		}
		if f.FirstOffset != st.Rows || len(f.Records) == 0 {
			continue // not the continuation (an older copy, or after a gap)
		}
		last := &f.Records[len(f.Records)-1]
		pos, ok := positionOfRecord(last)
		if !ok {
			if st.Snapshot == nil || s.isolation() != sqlserver.IsolationSnapshot {
				return nil // resumed by key from the saved state
			}
			s.log.Info("cdc recovered snapshot frame written before the position save", "wal_seq", msg.Sequence, "records", len(f.Records))
			st.Rows = f.NextOffset
			st.Frames++
			st.WALSeq = msg.Sequence
			continue
		}
		s.log.Info("cdc recovered frame written before the position save", "wal_seq", msg.Sequence, "records", len(f.Records), "position", pos.String())
		st.Snapshot = nil // a change frame comes after a finished snapshot
		st.Pos = pos
		st.Rows = f.NextOffset
		st.Frames++
		st.WALSeq = msg.Sequence
		if r := last.TS; r != 0 {
			st.LastCommit = time.Unix(0, r)
		}
	}
	return nil
}

func (s *Stream) onAck(end state, n, seq uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pubErr != nil {
		return // an earlier frame failed: nothing after it counts until the rewind
	}
	if err != nil {
		s.pubErr = err
		return
	}
	if end.CaptureInstance != s.acked.CaptureInstance {
		return
	}
	end.WALSeq = seq
	s.acked = end
	if !end.LastCommit.IsZero() && end.Snapshot == nil {
		s.finalized = end.LastCommit.Add(-time.Nanosecond)
	}
	s.dirty = true
	s.m.records.WithLabelValues(s.name).Add(float64(n))
	s.m.frames.WithLabelValues(s.name).Inc()
	if end.Snapshot != nil {
		s.m.snapshots.WithLabelValues(s.name).Add(float64(n))
	}
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// rewind waits for frames in flight and resets the read state to the
// acked state, so a retry republishes from there.
func (s *Stream) rewind(ctx context.Context) error {
	fctx, cancel := backoff.WithTimeout(ctx, s.cfg.DrainTimeout)
	defer cancel()
	err := s.pub.Flush(fctx)
	s.mu.Lock()
	s.pubErr = nil
	st := s.acked.clone()
	s.mu.Unlock()
	s.read = st
	s.frame, s.fbytes = s.frame[:0], 0
	if err != nil {
		return err
	}
	if rerr := s.recoverFromWAL(fctx, &st); rerr == nil && st.Rows != s.read.Rows {
		// The snapshot key of the acked state is behind the recovered
		// frames: the snapshot (if any) starts again.
		s.closeSnap()
		s.read = st.clone()
		s.mu.Lock()
		s.acked = st.clone()
		s.dirty = true
		s.mu.Unlock()
	}
	return nil
}

func (s *Stream) put(ctx context.Context, st state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("cdc %s: encode position: %w", s.name, err)
	}
	pctx, cancel := backoff.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.positions.Put(pctx, s.source(st.CaptureInstance), b); err != nil {
		return fmt.Errorf("cdc %s: save position: %w", s.name, err)
	}
	return nil
}

// save writes the acked state if it changed, and the progress fact when
// due (force: now).
func (s *Stream) save(ctx context.Context, force bool) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	dirty := s.dirty
	st := s.acked.clone()
	fin := s.finalized
	s.dirty = false
	s.mu.Unlock()
	var saved *state
	if dirty {
		st.UpdatedAt = time.Now().UTC()
		if err := s.put(ctx, st); err != nil {
			s.mu.Lock()
			s.dirty = true
			s.mu.Unlock()
			return err
		}
		saved = &st
	}
	if err := s.syncFloor(ctx, saved); err != nil {
		return err
	}
	if force || (dirty && st.Rows != s.progAcked && time.Since(s.lastProg) >= time.Second) || time.Since(s.lastProg) >= s.cfg.HeartbeatInterval {
		return s.publishProgress(ctx, st, fin)
	}
	return nil
}

func (s *Stream) publishProgress(ctx context.Context, st state, fin time.Time) error {
	now := time.Now().UTC()
	p := streams.Progress{
		Source: s.progressSource(), Tenant: s.tcfg.Tenant, Kind: "mssql", CaptureInstance: st.CaptureInstance,
		LastLSN: st.Pos.LSN.String(), Rows: st.Rows, Frames: st.Frames, FinalizedUntil: fin.UTC(), UpdatedAt: now,
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	pctx, cancel := backoff.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.progress.Put(pctx, p.Source, b); err != nil {
		return fmt.Errorf("cdc %s: progress: %w", s.name, err)
	}
	msg := nats.NewMsg(streams.ProgressSubject(p.Source))
	msg.Header.Set(streams.HeaderFormat, streams.FormatProgress)
	msg.Data = b
	if _, err := s.deps.JS.PublishMsg(pctx, msg); err != nil {
		return fmt.Errorf("cdc %s: progress: %w", s.name, err)
	}
	s.lastProg = time.Now()
	s.progAcked = st.Rows
	if !fin.IsZero() {
		s.m.lag.WithLabelValues(s.name).Set(time.Since(fin).Seconds())
	}
	return nil
}

func (s *Stream) saver(stop <-chan struct{}) {
	tick := time.NewTicker(min(time.Second, s.cfg.HeartbeatInterval))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-s.notify:
		case <-tick.C:
		}
		if err := s.save(context.Background(), false); err != nil {
			s.log.Warn("cdc save", "err", err)
		}
	}
}

// drain waits for frames in flight, then saves the position and progress.
func (s *Stream) drain() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	ferr := s.pub.Flush(ctx)
	s.mu.Lock()
	if ferr == nil && s.pubErr == nil && len(s.frame) == 0 && s.read.CaptureInstance == s.acked.CaptureInstance {
		// Everything read is acked (no open frame): save the read state, so
		// a finished snapshot or a heartbeat is not redone.
		ws := s.acked.WALSeq
		s.acked = s.read.clone()
		s.acked.WALSeq = ws
		s.dirty = true
	}
	s.mu.Unlock()
	serr := s.save(ctx, true)
	if ferr != nil {
		return fmt.Errorf("cdc %s: drain: %w", s.name, ferr)
	}
	return serr
}
