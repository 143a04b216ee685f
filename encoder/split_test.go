package encoder

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/streams"
)

// newSmallPayloadEnv is newEnv on a server whose max payload is max bytes.
func newSmallPayloadEnv(t *testing.T, max int32) *env {
	t.Helper()
	dir := t.TempDir()
	s, err := natsutil.StartServer(natsutil.ServerConfig{StoreDir: dir, Port: -1, SyncAlways: true, MaxPayload: max}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	srv := &natstest.Server{Server: s, StoreDir: dir}
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	st, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, srv: srv, js: js, store: st}
}

// TestReportOverMaxPayloadIsSplit: a flush whose report cannot be
// published in one message (a file per tenant, each with its stats) is
// reported as several reports of disjoint batches, each with the files of
// its own batches, instead of retrying the publish for ever.
func TestReportOverMaxPayloadIsSplit(t *testing.T) {
	const maxPayload = 64 << 10
	e := newSmallPayloadEnv(t, maxPayload)
	c := e.committer(nil)
	ts := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixNano()
	var bs []*streams.MinedBatch
	for i := range 160 {
		seq := uint64(i + 1)
		bs = append(bs, batch(seq, seq-1, fmt.Sprintf("tenant%03d", i), ts, 2))
	}
	e.publish(bs...) // all in the queue before the encoder runs: one flush
	cfg := fastConfig()
	cfg.FetchBatch = 512
	cfg.MaxBatches = 1000
	cfg.MaxAge = 500 * time.Millisecond
	e.reg = prometheus.NewRegistry()
	e.start(cfg, nil, nil)
	waitFor(t, 90*time.Second, "work queue empty", func() bool { return e.queueLen() == 0 })
	c.checkExactlyOnce(t, seqsOf(bs))
	if n := metricSum(t, e.reg, "quarry_encoder_report_splits_total"); n < 1 {
		t.Fatalf("report splits = %v, want at least 1", n)
	}
	acc := c.accepted()
	t.Logf("%d accepted reports", len(acc))
	if len(acc) < 2 {
		t.Fatalf("%d accepted reports, want the flush split into several", len(acc))
	}
	for _, r := range acc {
		b, _ := json.Marshal(r)
		if len(b) > maxPayload {
			t.Errorf("report %s is %d bytes, over %d", r.ID, len(b), maxPayload)
		}
		own := map[string]bool{}
		for _, br := range r.Batches {
			own[fmt.Sprintf("tenant%03d", br.Seq-1)] = true
		}
		for _, f := range r.Files {
			if f.Table != streams.TableRecords {
				continue
			}
			if tn := f.PartitionValues["tenant"]; !own[tn] {
				t.Errorf("report %s has the file of %s, whose batch it does not cover", r.ID, tn)
			}
			if f.Stats == "" || !strings.Contains(f.Stats, "numRecords") {
				t.Errorf("report %s file %s lost its stats", r.ID, f.Path)
			}
		}
	}
	// Every uploaded file is in an accepted report: the unpublished
	// oversize flush deleted its files.
	keys, err := e.store.List(t.Context(), "records/")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(bs) {
		t.Errorf("%d records files in the store, want %d (one per tenant)", len(keys), len(bs))
	}
}

// TestSingleBatchReportDropsStats: one batch cannot be split; its report
// over the max payload goes without the optional file stats. (A records
// table of the dated layout makes a file per day of a batch.)
func TestSingleBatchReportDropsStats(t *testing.T) {
	e := newSmallPayloadEnv(t, 64<<10)
	createDatedTable(t, e.store)
	c := e.committer(nil)
	day := int64(24 * time.Hour)
	b := batch(1, 0, "acme", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(), 200)
	for i := range b.Records {
		b.Records[i].TS += int64(i) * day // a file per record: 200 dates
	}
	e.publish(b)
	e.start(fastConfig(), nil, nil)
	waitFor(t, 60*time.Second, "work queue empty", func() bool { return e.queueLen() == 0 })
	c.checkExactlyOnce(t, []uint64{1})
	acc := c.accepted()
	if len(acc) != 1 {
		t.Fatalf("%d accepted reports, want 1", len(acc))
	}
	records := 0
	for _, f := range acc[0].Files {
		if f.Table == streams.TableRecords {
			records++
			if f.Stats != "" {
				t.Errorf("file %s kept its stats in an oversize report", f.Path)
			}
		}
	}
	if records != 200 {
		t.Errorf("%d records files, want 200", records)
	}
}
