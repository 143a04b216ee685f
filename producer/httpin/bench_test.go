package httpin_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/internal/recvtest"
	"github.com/quarrylake/quarry/streams"
)

// BenchmarkJSONLines posts bodies of 1000 JSON lines from 4 clients and
// reports durable lines per second (the answer comes once they are in the
// WAL). A baseline for issue 14's throughput work, not a target.
func BenchmarkJSONLines(b *testing.B) {
	s := natstest.RunServer(b)
	_, js := natstest.Connect(b, s.URL(), streams.Config{})
	hub := recvtest.HubOn(b, js, producer.Config{Linger: 20 * time.Millisecond}, nil)
	url := start(b, hub, nil) + "/jsonline"
	var body strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&body, `{"message":"GET /api/v1/items/%d 200 %dms","host":"web-%d","@timestamp":"2026-01-02T03:04:05Z"}`+"\n", i, i%97, i%7)
	}
	payload := body.String()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan struct{})
	go func() {
		for range b.N {
			next <- struct{}{}
		}
		close(next)
	}()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				resp, err := http.Post(url, "application/x-ndjson", strings.NewReader(payload))
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N*1000)/time.Since(start).Seconds(), "lines/s")
}
