package subscribe_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/pipeline"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/subscribe"
)

// TestPipelineSubscriberMidRun runs the whole pipeline in-process (records
// v3 files from the real encoders): a subscriber started after the first
// lines are committed, while producers go on publishing, gets every line
// once, each tenant's in WAL order.
func TestPipelineSubscriberMidRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := pipeline.Start(ctx, pipeline.Config{Server: pipeline.ServerConfig{DataDir: filepath.Join(t.TempDir(), "data"), Encoders: 2}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := map[string][]string{}
	publish := func(tenant string, from, n int) {
		t.Helper()
		var lines []string
		for i := from; i < from+n; i++ {
			lines = append(lines, fmt.Sprintf("user u%d logged in from host h%d after %d ms", i%7, i%3, i))
		}
		l, err := producer.NewReader(producer.Config{Tenant: tenant}, producer.Deps{JS: p.JS}, strings.NewReader(strings.Join(lines, "\n")+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Run(ctx); err != nil {
			t.Fatalf("producer %s: %v", tenant, err)
		}
		want[tenant] = append(want[tenant], lines...)
	}
	waitCommitted := func() {
		t.Helper()
		last, err := p.WALLastSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.WaitCommitted(ctx, last, 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	publish("acme", 0, 200)
	publish("beta", 0, 50)
	waitCommitted()

	sub, err := subscribe.Subscribe(ctx, subscribe.Config{Store: p.Store, JS: p.JS, PollInterval: never})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	got := map[string][]string{}
	n := 0
	next := func(k int) {
		t.Helper()
		for range k {
			r, err := sub.Next(ctx)
			if err != nil {
				t.Fatalf("Next after %d records: %v", n, err)
			}
			got[r.Tenant] = append(got[r.Tenant], r.Line)
			n++
		}
	}
	next(120) // part-way through the lake's past
	publish("beta", 50, 100)
	publish("acme", 200, 150)
	next(250 + 250 - 120)
	waitCommitted()
	quiet(t, sub)
	for _, tenant := range []string{"acme", "beta"} {
		if !slices.Equal(got[tenant], want[tenant]) {
			t.Errorf("%s: delivered %d lines, want %d in WAL order", tenant, len(got[tenant]), len(want[tenant]))
		}
	}
}
