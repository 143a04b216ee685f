package committer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/streams"
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
	r := startIdleHour(t, e, cfg)
	c := r.c
	// Far shorter than the hour a fetch may wait.
	const deadline = 20 * time.Second
	eventually(t, deadline, "the replay of the empty report stream", func() bool { return c.Ready() == nil })

	// WAL frames beyond the reports, so that the WAL is never drained
	// (TestDrainedWALCommittedAtOnce) and a.2 waits for the interval.
	e.walFrames(5)
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

// walFrames publishes n frames to the WAL (their content is not read).
func (e *env) walFrames(n int) {
	e.t.Helper()
	for i := range n {
		if _, err := e.js.Publish(context.Background(), streams.LineSubject("acme"), []byte{byte(i)}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// TestDrainedWALCommittedAtOnce: within a commit interval, an advance
// that covers every frame in the WAL (the pipeline drained: no report can
// come before more lines do) is committed at once, not when the interval
// ends; one that does not cover them waits. The interval and the fetches'
// wait are an hour, so HighWater reaches 3 within the test's deadline only
// by the drain rule, and a.2 (WAL frame 3 not yet written) cannot be
// committed alone.
func TestDrainedWALCommittedAtOnce(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig("c1")
	cfg.CommitInterval = time.Hour
	r := startIdleHour(t, e, cfg)
	c := r.c
	const deadline = 20 * time.Second
	e.walFrames(3)
	eventually(t, deadline, "the replay of the empty report stream", func() bool { return c.Ready() == nil })

	e.publish(e.encode("a.1", batch{1, 0}))
	eventually(t, deadline, "report a.1 committed by an idle committer", func() bool { return c.HighWater() >= 1 })
	e.publish(e.encode("a.2", batch{2, 1}))
	e.publish(e.encode("a.3", batch{3, 2}))
	eventually(t, deadline, "reports a.2 and a.3 committed once the WAL is drained", func() bool { return c.HighWater() >= 3 })
	r.stop(t)
	e.exactlyOnce(1, 2, 3)
	if v := e.table("records"); v.version != 2 {
		t.Errorf("records version %d, want 2 (a.1's commit, then a.2 and a.3 in one)", v.version)
	}
}

// startIdleHour runs a committer of cfg whose fetches may wait an hour
// for a report (idleWait), so that it commits only when the rule under
// test says so; it stops with the test.
func startIdleHour(t *testing.T, e *env, cfg Config) *running {
	t.Helper()
	c, err := New(cfg, Deps{JS: e.js, Store: e.local, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	c.idleWait = time.Hour
	return runCommitter(t, c)
}

// slowWAL is a fault-injecting JetStream whose lookups of the WAL stream
// answer only when their context ends, as a cluster electing the WAL's
// leader does; everything else is the real server's.
type slowWAL struct{ jetstream.JetStream }

func (s slowWAL) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	if name == streams.WALStream {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.JetStream.Stream(ctx, name)
}

// TestSlowWALNoDrainStall: the drain check asks the WAL within an interval;
// a WAL that does not answer costs the check at most that interval, not
// op_timeout per round: reports keep being committed at the interval.
func TestSlowWALNoDrainStall(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig("c1")
	cfg.CommitInterval = 200 * time.Millisecond
	cfg.OpTimeout = 5 * time.Minute
	c, err := New(cfg, Deps{JS: slowWAL{e.js}, Store: e.local, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	r := runCommitter(t, c)
	const deadline = 30 * time.Second
	eventually(t, deadline, "the replay of the empty report stream", func() bool { return c.Ready() == nil })
	for i := uint64(1); i <= 4; i++ {
		e.publish(e.encode(fmt.Sprintf("s.%d", i), batch{i, i - 1}))
		eventually(t, deadline, fmt.Sprintf("report s.%d committed", i), func() bool { return c.HighWater() >= i })
	}
	r.stop(t)
	e.exactlyOnce(1, 2, 3, 4)
}
