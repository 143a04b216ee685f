package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/objstore"
)

// TableStatus is one Delta table's newest version and newest checkpoint
// (-1: none).
type TableStatus struct {
	Table      string `json:"table"`
	Version    int64  `json:"version"`
	Checkpoint int64  `json:"checkpoint"`
}

// Status is what a lake says about its own completeness, read from the
// Delta logs alone (no NATS).
type Status struct {
	HighWater uint64        `json:"high_water"`
	Tables    []TableStatus `json:"tables"`
	// Progress is the progress table's live rows (empty when the lake has
	// no progress table yet).
	Progress []ProgressRow `json:"progress"`
}

// Status reads the high-water, each table's version and newest checkpoint
// and the progress rows.
func (l *Lake) Status(ctx context.Context) (Status, error) {
	var st Status
	hw, err := l.HighWater(ctx)
	if err != nil {
		return st, err
	}
	st.HighWater = hw
	for _, t := range []*delta.Table{l.records, l.templates, l.progress} {
		snap, err := t.Snapshot(ctx)
		if err != nil {
			return st, fmt.Errorf("%s snapshot: %w", t.Root(), err)
		}
		ts := TableStatus{Table: t.Root(), Version: snap.Version, Checkpoint: -1}
		b, err := l.store.Get(ctx, t.LastCheckpointKey())
		switch {
		case errors.Is(err, objstore.ErrNotFound):
		case err != nil:
			return st, fmt.Errorf("read %s: %w", t.LastCheckpointKey(), err)
		default:
			var lc delta.LastCheckpoint
			if err := json.Unmarshal(b, &lc); err != nil {
				return st, fmt.Errorf("read %s: %w", t.LastCheckpointKey(), err)
			}
			ts.Checkpoint = lc.Version
		}
		st.Tables = append(st.Tables, ts)
	}
	if st.Progress, _, err = l.Progress(ctx); err != nil {
		return st, err
	}
	if st.Progress == nil {
		st.Progress = []ProgressRow{}
	}
	return st, nil
}
