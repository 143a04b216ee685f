package committer

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/dlq"
)

// dlqTimeout bounds the stream-info request behind one scrape or /readyz.
const dlqTimeout = 2 * time.Second

// dlqCollector reports the dead-letter stream's size at each scrape: one
// stream-info request, so the figure is the stream's own, whichever stage
// dead-lettered. A scrape that cannot reach the stream reports nothing.
type dlqCollector struct {
	js           jetstream.JetStream
	msgs, nbytes *prometheus.Desc
}

func newDLQCollector(js jetstream.JetStream) *dlqCollector {
	return &dlqCollector{
		js: js,
		msgs: prometheus.NewDesc("quarry_committer_dlq_messages",
			"Messages in the dead-letter stream (every stage's), at scrape time.", nil, nil),
		nbytes: prometheus.NewDesc("quarry_committer_dlq_bytes",
			"Bytes in the dead-letter stream, at scrape time.", nil, nil),
	}
}

func (c *dlqCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.msgs; ch <- c.nbytes }

func (c *dlqCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), dlqTimeout)
	defer cancel()
	msgs, nbytes, err := dlq.Size(ctx, c.js)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.msgs, prometheus.GaugeValue, float64(msgs))
	ch <- prometheus.MustNewConstMetric(c.nbytes, prometheus.GaugeValue, float64(nbytes))
}

// Detail is what /readyz shows beside the readiness verdict: the size of
// the dead-letter stream (`quarry dlq list` shows its messages). It never
// makes the committer unready.
func (c *Committer) Detail() string {
	ctx, cancel := context.WithTimeout(context.Background(), dlqTimeout)
	defer cancel()
	msgs, nbytes, err := dlq.Size(ctx, c.js)
	if err != nil {
		return fmt.Sprintf("dead letters: unknown (%v)", err)
	}
	return fmt.Sprintf("dead letters: %d (%d bytes; quarry dlq list)", msgs, nbytes)
}
