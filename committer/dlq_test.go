package committer

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarrylake/quarry/streams"
)

// The dead-letter stream's size is a committer metric and a /readyz detail
// line, read from the stream at scrape time: dead letters of any stage
// count, and the figure follows the stream as it grows.
func TestDLQSizeMetricAndDetail(t *testing.T) {
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	c, err := New(testConfig("c1"), Deps{JS: e.js, Store: e.local, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	gauge := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "quarry_committer_dlq_messages" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("quarry_committer_dlq_messages not gathered")
		return 0
	}
	if got := gauge(); got != 0 {
		t.Fatalf("empty DLQ: gauge %v", got)
	}
	if d := c.Detail(); !strings.Contains(d, "dead letters: 0 ") {
		t.Fatalf("detail %q", d)
	}
	for i, stage := range []string{"miner", "encoder", "producer"} {
		msg := nats.NewMsg(streams.DeadLetterSubject(stage))
		msg.Data = []byte("bad " + stage)
		if _, err := e.js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		if got := gauge(); got != float64(i+1) {
			t.Fatalf("after %d dead letters: gauge %v", i+1, got)
		}
	}
	if d := c.Detail(); !strings.Contains(d, "dead letters: 3 ") {
		t.Fatalf("detail %q", d)
	}
	if n, err := testutil.GatherAndCount(reg, "quarry_committer_dlq_bytes"); err != nil || n != 1 {
		t.Fatalf("dlq bytes gathered %d times: %v", n, err)
	}
}
