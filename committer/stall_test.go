package committer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/streams"
)

// TestCheckpointFailuresShowInReady: checkpoints that keep failing (the
// committer retries them at each interval, forever) show in Ready once they
// failed twice in a row for StallAfter; one failure alone does not, and a
// checkpoint that lands clears it.
func TestCheckpointFailuresShowInReady(t *testing.T) {
	e := newEnv(t)
	faults := objstore.NewFaults(1)
	// Commits are PutIfAbsent; only checkpoints and _last_checkpoint Put.
	id := faults.Add(objstore.Rule{Op: objstore.OpPut, KeyPrefix: lake.RecordsTable + "/_delta_log/"})
	cfg := testConfig("c1")
	cfg.CheckpointInterval = 1
	cfg.StallAfter = time.Nanosecond
	r := e.start(cfg, objstore.NewFaulty(e.local, faults))
	failures := func() float64 {
		return testutil.ToFloat64(r.c.m.checkpoints.WithLabelValues(lake.RecordsTable, "error"))
	}
	stalled := func() bool {
		err := r.c.Ready()
		return err != nil && strings.Contains(err.Error(), "checkpoint "+lake.RecordsTable)
	}
	e.publish(e.encode("a.1", batch{1, 0}))
	e.waitHW(r.c, 1)
	eventually(t, 15*time.Second, "a first checkpoint failure", func() bool { return failures() >= 1 })
	if failures() == 1 && stalled() {
		t.Fatalf("one checkpoint failure shows as a stall: %v", r.c.Ready())
	}
	e.publish(e.encode("a.2", batch{2, 1}))
	e.waitHW(r.c, 2)
	eventually(t, 15*time.Second, "checkpoint failures in Ready", stalled)
	if err := r.c.Ready(); !strings.Contains(err.Error(), "attempts in a row") {
		t.Errorf("Ready: %v", err)
	}
	faults.Remove(id)
	for s := uint64(3); s <= 4; s++ {
		e.publish(e.encode(fmt.Sprintf("a.%d", s), batch{s, s - 1}))
		e.waitHW(r.c, s)
	}
	eventually(t, 15*time.Second, "a checkpoint after the store healed", func() bool { return e.lastCheckpointVersion(lake.RecordsTable) >= 3 })
	eventually(t, 15*time.Second, "Ready clear of checkpoint failures", func() bool { return !stalled() })
	e.exactlyOnce(1, 2, 3, 4)
}

// TestNoticeFailuresShowInReady: commit notices that cannot be published
// (the notice stream is gone) are retried at each advance and show in
// Ready once they failed twice in a row for StallAfter; when the stream is
// back the missing notices are published and Ready clears.
func TestNoticeFailuresShowInReady(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if err := e.js.DeleteStream(ctx, streams.NoticeStream); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig("c1")
	cfg.StallAfter = time.Nanosecond
	r := e.start(cfg, e.local)
	stalled := func() bool {
		err := r.c.Ready()
		return err != nil && strings.Contains(err.Error(), "commit notices "+lake.RecordsTable)
	}
	for s := uint64(1); s <= 3; s++ {
		e.publish(e.encode(fmt.Sprintf("a.%d", s), batch{s, s - 1}))
		e.waitHW(r.c, s)
	}
	eventually(t, 15*time.Second, "notice failures in Ready", stalled)
	if err := streams.Ensure(ctx, e.js, streams.Config{}.Defaults()); err != nil {
		t.Fatal(err)
	}
	e.publish(e.encode("a.4", batch{4, 3}))
	e.waitHW(r.c, 4)
	eventually(t, 15*time.Second, "Ready clear of notice failures", func() bool { return !stalled() })
	st, err := e.js.Stream(ctx, streams.NoticeStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, streams.NoticeSubject(lake.RecordsTable))
	if err != nil {
		t.Fatal(err)
	}
	n, err := streams.DecodeNotice(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || n.Version < 1 || info.State.Msgs < uint64(n.Version) {
		t.Fatalf("after the stream came back: last records notice %d, stream %+v, %v", n.Version, info, err)
	}
	e.exactlyOnce(1, 2, 3, 4)
}
