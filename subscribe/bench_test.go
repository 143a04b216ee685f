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

// BenchmarkAckToDelivery measures, on the in-process pipeline, the time
// from a producer's last publish-ack of a batch of lines to the delivery of
// the batch's last line by a subscriber that follows commit notices.
// Batches go one at a time (a quiet pipeline, not one under load), so the
// figures are the floor of the latency: the committer's CommitInterval plus
// the stages' hops. Reports p50 and p99 in ms.
//
//	go test -run '^$' -bench AckToDelivery -benchtime 200x ./subscribe/
func BenchmarkAckToDelivery(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p, err := pipeline.Start(ctx, pipeline.Config{Server: pipeline.ServerConfig{DataDir: filepath.Join(b.TempDir(), "data"), Encoders: 2}}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	sub, err := subscribe.Subscribe(ctx, subscribe.Config{Store: p.Store, JS: p.JS, From: subscribe.Now()})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	const batch = 100
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		var lines []string
		for j := range batch {
			lines = append(lines, fmt.Sprintf("request %d.%d served in %d ms", i, j, j))
		}
		l, err := producer.NewReader(producer.Config{Tenant: "acme"}, producer.Deps{JS: p.JS}, strings.NewReader(strings.Join(lines, "\n")+"\n"))
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Run(ctx); err != nil {
			b.Fatal(err)
		}
		acked := time.Now()
		for range batch {
			if _, err := sub.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
		lat = append(lat, time.Since(acked))
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
