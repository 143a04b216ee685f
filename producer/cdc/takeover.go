package cdc

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/quarrylake/quarry/producer/sqlserver"
)

// checkSuccessor looks for a newer capture instance of the same table,
// at most every SchemaCheckInterval.
func (s *Stream) checkSuccessor(ctx context.Context) error {
	if s.succ != nil || time.Since(s.lastScan) < s.cfg.SchemaCheckInterval {
		return nil
	}
	cis, err := s.deps.Source.CaptureInstances(ctx)
	if err != nil {
		return fmt.Errorf("cdc %s: %w", s.name, err)
	}
	s.lastScan = time.Now()
	cur := s.plan.ci
	present := false
	for i := range cis {
		c := cis[i]
		if strings.EqualFold(c.Name, cur.Name) {
			present = true
			continue
		}
		if c.SameTable(cur) && (c.CreateDate.After(cur.CreateDate) || (c.CreateDate.Equal(cur.CreateDate) && c.StartLSN.Compare(cur.StartLSN) > 0)) {
			if s.succ == nil || c.CreateDate.Before(s.succ.CreateDate) {
				s.succ = &c
			}
		}
	}
	if s.succ != nil {
		s.log.Info("cdc newer capture instance found", "successor", s.succ.Name, "takeover_lsn", s.succ.StartLSN)
		if !present && s.read.Pos.Compare(sqlserver.Through(s.succ.StartLSN.Prev())) < 0 {
			return fatal(fmt.Errorf("%w: capture instance %s was dropped at saved LSN %s, before its successor %s starts at %s",
				ErrPurgedRange, cur.Name, s.read.Pos.LSN, s.succ.Name, s.succ.StartLSN))
		}
		return nil
	}
	if !present {
		return fatal(fmt.Errorf("cdc %s: %w: %s was dropped", s.name, sqlserver.ErrNoCaptureInstance, cur.Name))
	}
	return nil
}

// takeover switches to the successor capture instance at the current
// position (everything before it is acked).
func (s *Stream) takeover(ctx context.Context) error {
	next := *s.succ
	plan, err := newColumnPlan(next, s.tcfg)
	if err != nil {
		return fatal(err)
	}
	st, found, err := s.loadState(ctx, next.Name)
	if err != nil {
		return err
	}
	if !found {
		st = state{V: 1, CaptureInstance: next.Name, Pos: s.read.Pos, LastCommit: s.read.LastCommit}
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	st.UpdatedAt = time.Now().UTC()
	if err := s.put(ctx, st); err != nil {
		return err
	}
	s.mu.Lock()
	old := s.acked.clone()
	s.mu.Unlock()
	old.Successor = next.Name
	old.UpdatedAt = time.Now().UTC()
	if err := s.put(ctx, old); err != nil {
		return err
	}
	s.log.Info("cdc takeover by newer capture instance", "from", old.CaptureInstance, "to", next.Name, "position", st.Pos.String())
	s.plan = plan
	s.succ = nil
	s.lastScan = time.Time{}
	s.read = st.clone()
	s.mu.Lock()
	s.acked = st.clone()
	s.dirty = false
	s.mu.Unlock()
	return nil
}
