package committer

import (
	"context"
	"testing"
	"time"
)

// TestReportCommittedWithoutFetchWait: a report is committed as soon as a
// commit may be made, not when a fetch's wait ends. The fetches may wait an
// hour here and the commit interval is long, so the committer commits only
// if it takes a report the moment it arrives: an idle committer (its last
// commit more than an interval ago) commits the first report at once, and
// a report that arrives within the interval is committed when the interval
// ends, not an hour later.
func TestReportCommittedWithoutFetchWait(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig("c1")
	cfg.CommitInterval = 3 * time.Second
	c, err := New(cfg, Deps{JS: e.js, Store: e.local, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	c.idleWait = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	// Far shorter than the hour a fetch may wait.
	const deadline = 20 * time.Second
	eventually(t, deadline, "the replay of the empty report stream", func() bool { return c.Ready() == nil })

	e.publish(e.encode("a.1", batch{1, 0}))
	eventually(t, deadline, "report a.1 committed by an idle committer", func() bool { return c.HighWater() >= 1 })
	// Within the interval after a.1's commit: committed when it ends.
	e.publish(e.encode("a.2", batch{2, 1}))
	eventually(t, deadline, "report a.2 committed at the end of the interval", func() bool { return c.HighWater() >= 2 })
	r.stop(t)
	e.exactlyOnce(1, 2)
	if v := e.table("records"); v.version != 2 {
		t.Errorf("records version %d, want 2 (create, one commit per report)", v.version)
	}
}
