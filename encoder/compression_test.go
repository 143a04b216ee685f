package encoder

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/streams"
)

// TestHighCompressionWhenIdle: a flush made by age with little buffered in
// an idle process writes its records file at zstd's best level (the bytes
// of recfile.Encode WithHighCompression); one made by size, one in a busy
// process (its CPU clock, injected, runs faster than the wall), one with
// high_compression_below at -1 and one whose buffer is over the workers'
// share keep the default level; quarry_encoder_high_compression_files_total
// counts the first.
func TestHighCompressionWhenIdle(t *testing.T) {
	tests := []struct {
		name    string
		cfg     func(c *Config, size int64) // size: a batch's bytes as received
		batches int
		busy    bool // the process's CPU clock runs (else it stands still: idle)
		starved bool // its threads wait for a CPU (other work holds them)
		high    bool
	}{
		{name: "age, little buffered", batches: 1, high: true, cfg: func(c *Config, _ int64) { c.MaxAge = 200 * time.Millisecond }},
		{name: "age, little buffered, busy process", batches: 1, busy: true, cfg: func(c *Config, _ int64) { c.MaxAge = 200 * time.Millisecond }},
		{name: "age, little buffered, starved process", batches: 1, starved: true, cfg: func(c *Config, _ int64) { c.MaxAge = 200 * time.Millisecond }},
		{name: "size, always", batches: 1, busy: true, high: true, cfg: func(c *Config, size int64) {
			c.MaxAge, c.AckWait, c.TargetFileBytes, c.HighCompression = 5*time.Minute, time.Minute, size, HighCompressionAlways
		}},
		{name: "age, little buffered, idle, never", batches: 1, cfg: func(c *Config, _ int64) {
			c.MaxAge, c.HighCompression = 200*time.Millisecond, HighCompressionNever
		}},
		{name: "age, never", batches: 1, cfg: func(c *Config, _ int64) { c.MaxAge = 200 * time.Millisecond; c.HighCompressionBelow = -1 }},
		{name: "age, under the limit for one worker", batches: 1, high: true, cfg: func(c *Config, size int64) {
			c.MaxAge, c.HighCompressionBelow = 200*time.Millisecond, size*3/2
		}},
		{name: "age, over the share of each of two workers", batches: 1, cfg: func(c *Config, size int64) {
			c.MaxAge, c.Workers, c.HighCompressionBelow = 200*time.Millisecond, 2, size*3/2
		}},
		{name: "size", batches: 2, cfg: func(c *Config, size int64) {
			c.MaxAge, c.AckWait, c.TargetFileBytes = 5*time.Minute, time.Minute, size
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.committer(nil)
			var bs []*streams.MinedBatch
			for i := range tc.batches {
				seq := uint64(1 + i)
				bs = append(bs, batch(seq, seq-1, "acme", time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC).UnixNano(), 2000))
			}
			cfg := fastConfig()
			cfg.AckWait = time.Minute
			tc.cfg(&cfg, int64(len(streams.AppendMinedBatch(nil, bs[0]))))
			e.reg = prometheus.NewRegistry()
			var cpu, wait atomic.Int64
			e.start(cfg, nil, nil, func(enc *Encoder) {
				enc.cpuUsed = func() (time.Duration, bool) {
					if tc.busy {
						return time.Duration(cpu.Add(int64(time.Hour))), true
					}
					// Idle or starved: a little CPU, far less than
					// half a core over MaxAge.
					return time.Duration(cpu.Add(int64(time.Millisecond))), true
				}
				enc.cpuWaited = func() (time.Duration, bool) {
					if tc.starved {
						return time.Duration(wait.Add(int64(time.Second))), true
					}
					return 0, true
				}
			})
			e.publish(bs...)
			waitFor(t, 30*time.Second, "a report", func() bool { return len(c.reports()) > 0 })
			r := c.reports()[0]
			var data []byte
			for _, fi := range r.Files {
				if fi.Table == streams.TableRecords {
					var err error
					if data, err = e.store.Get(context.Background(), fi.Table+"/"+fi.Path); err != nil {
						t.Fatal(err)
					}
				}
			}
			if data == nil {
				t.Fatalf("report %s has no records file", r.ID)
			}
			var rows []recfile.Row
			for _, b := range bs {
				for _, ref := range r.Batches {
					if ref.Seq == b.WALSeq {
						rows = recfile.AppendBatch(rows, b)
					}
				}
			}
			encode := func(high bool) []byte {
				f, err := recfile.Encode(rows, textsOf(bs), append(lake.CurrentLayout.EncodeOptions(), recfile.WithHighCompression(high))...)
				if err != nil {
					t.Fatal(err)
				}
				return f.Data
			}
			hi, def := encode(true), encode(false)
			if bytes.Equal(hi, def) || len(hi) >= len(def) {
				t.Fatalf("best level %d bytes, default %d: the test's rows do not tell them apart", len(hi), len(def))
			}
			want := def
			if tc.high {
				want = hi
			}
			if !bytes.Equal(data, want) {
				t.Errorf("records file of %d bytes; at the best level %d, at the default %d; want high %v", len(data), len(hi), len(def), tc.high)
			}
			n := 0.0
			if tc.high {
				n = 1
			}
			if got := metricSum(t, e.reg, "quarry_encoder_high_compression_files_total"); got != n {
				t.Errorf("quarry_encoder_high_compression_files_total %v, want %v", got, n)
			}
		})
	}
}
