package encoder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/streams"
)

// metricSum is the sum of a registered counter or gauge over its series.
func metricSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var v float64
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
			return v
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// recRow is a records row as a test compares it: the line rendered.
type recRow struct {
	WALSeq, TS      int64
	Index           uint32
	TemplateID      uint64
	TemplateVersion uint32
	Source, Line    string
	Attrs           []streams.Attr
}

// expectedRows builds the records rows of bs independently of the encoder.
func expectedRows(bs []*streams.MinedBatch) []recRow {
	tpl := textsOf(bs)
	var out []recRow
	for _, b := range bs {
		for _, r := range b.Records {
			text := tpl[recfile.Key{ID: r.TemplateID, Version: r.TemplateVersion}]
			line, err := mining.Render(text, r.Params)
			if err != nil {
				panic(err)
			}
			out = append(out, recRow{WALSeq: int64(b.WALSeq), Index: r.Index, TS: r.TS / 1000,
				TemplateID: r.TemplateID, TemplateVersion: r.TemplateVersion, Line: line, Source: b.Source, Attrs: r.Attrs})
		}
	}
	return out
}

// readRecords decodes a records v3 file with the texts tpl.
func readRecords(t *testing.T, st objstore.Store, key string, tpl recfile.Templates) []recRow {
	t.Helper()
	data, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	recs, err := recfile.Decode(data, tpl)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	out := make([]recRow, len(recs))
	for i, r := range recs {
		out[i] = recRow{WALSeq: int64(r.WALSeq), Index: r.Index, TS: r.TS / 1000, TemplateID: r.TemplateID,
			TemplateVersion: r.TemplateVersion, Source: r.Source, Line: string(r.Line), Attrs: r.Attrs}
	}
	return out
}

// createDatedTable creates the records table in the layout of lakes made
// before issue 10: partitioned by (tenant, date).
func createDatedTable(t *testing.T, st objstore.Store) {
	t.Helper()
	err := delta.OpenTable(st, lake.RecordsTable).Create(context.Background(), delta.Metadata{
		SchemaString: lake.RecordsSchemaString(), PartitionColumns: lake.DatedLayout.PartitionColumns(), Configuration: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
}

// checkDateColumn checks that a records file has (want) or lacks the date
// column and that its every value is the UTC day of the row's ts, read
// with parquet-go alone.
func checkDateColumn(t *testing.T, data []byte, want bool) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	_, has := f.Schema().Lookup("date")
	if has != want {
		t.Fatalf("date column %v, want %v", has, want)
	}
	if !has {
		return
	}
	type row struct {
		TS   int64 `parquet:"ts"`
		Date int32 `parquet:"date"`
	}
	rows, err := parquet.Read[row](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	unit := int64(1e6) // ts in milliseconds (recfile writes MILLIS for whole ms)
	if leaf, _ := f.Schema().Lookup("ts"); leaf.Node.Type().LogicalType().String() == "TIMESTAMP(isAdjustedToUTC=true,unit=MICROS)" {
		unit = 1e3
	}
	for _, r := range rows {
		if r.Date != recfile.Day(r.TS*unit) {
			t.Errorf("row ts %d: date %d, want %d", r.TS, r.Date, recfile.Day(r.TS*unit))
		}
	}
}

func checkParquetMeta(t *testing.T, data []byte, key string) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("open %s: %v", key, err)
	}
	// Records v3 or a later form of it (not the v2 fallback): which one
	// depends on the rows and, through encoder.high_compression auto, on
	// the machine's load (records v7 is written at zstd's best level only).
	if v, _ := f.Lookup("quarry.records.version"); strings.HasPrefix(key, "records/") {
		if n, err := strconv.Atoi(v); err != nil || n < 3 || n > recfile.Version {
			t.Errorf("%s: records version %q, want 3 to %d", key, v, recfile.Version)
		}
	}
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			// zstd, but for a column of a few bytes (recfile leaves
			// those uncompressed in records and templates files: a zstd
			// frame costs more).
			tiny := c.MetaData.Codec == format.Uncompressed && c.MetaData.TotalUncompressedSize < 128
			if c.MetaData.Codec != format.Zstd && !tiny {
				t.Errorf("%s column %v: codec %v (%d bytes), want zstd", key, c.MetaData.PathInSchema, c.MetaData.Codec, c.MetaData.TotalUncompressedSize)
			}
			// A templates file keeps no chunk statistics (lake.EncodeTemplates:
			// the add action's stats bound the file).
			if strings.HasPrefix(key, "templates/") && c.MetaData.Statistics.MinValue != nil {
				t.Errorf("%s column %v: statistics kept", key, c.MetaData.PathInSchema)
			}
		}
	}
}

// TestFilesRoundTrip: every batch's rows are in the accepted reports'
// files, once, with their partition values: in a lake without a records
// table (the committer creates it in lake.CurrentLayout) one file per tenant
// per flush, each row with its date column; in a table of the old dated
// layout, one file per (tenant, UTC day) without it.
func TestFilesRoundTrip(t *testing.T) {
	for _, l := range []lake.Layout{lake.CurrentLayout, lake.DatedLayout} {
		t.Run(l.String(), func(t *testing.T) { testFilesRoundTrip(t, l) })
	}
}

func testFilesRoundTrip(t *testing.T, layout lake.Layout) {
	e := newEnv(t)
	if layout.Dated {
		createDatedTable(t, e.store)
	}
	c := e.committer(nil)
	near := time.Date(2026, 11, 29, 23, 59, 57, 0, time.UTC).UnixNano() // crosses midnight
	bs := []*streams.MinedBatch{
		batch(3, 0, "acme", near, 5),
		batch(5, 3, "beta", near, 2),
		{WALSeq: 8, PrevSeq: 5, Tenant: "acme", Source: "src-acme", Quarantined: 4}, // empty batch
		batch(9, 8, "acme", near+int64(10*time.Second), 3),
		batch(12, 9, "beta", near-int64(24*time.Hour), 1),
	}
	bs[1].Records[0].Attrs = nil // no attributes: a null map
	e.publish(bs...)
	cfg := fastConfig()
	cfg.MaxAge = 300 * time.Millisecond
	// The counts below are of batches received: a redelivery after
	// AckWait would count one twice (seen at 2 s under load), and this
	// test is not about redelivery.
	cfg.AckWait = time.Minute
	e.reg = prometheus.NewRegistry()
	e.start(cfg, nil, nil)
	cfg.Name = "idle" // a second encoder registering the same metrics
	e.start(cfg, nil, nil)
	waitFor(t, 30*time.Second, "work queue empty", func() bool { return e.queueLen() == 0 })
	c.checkExactlyOnce(t, seqsOf(bs))
	waitFor(t, 30*time.Second, "inflight gauge zero", func() bool { return metricSum(t, e.reg, "quarry_encoder_inflight_batches") == 0 })
	for name, want := range map[string]float64{"quarry_encoder_batches_total": 5, "quarry_encoder_records_total": 11} {
		if got := metricSum(t, e.reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n, err := testutil.GatherAndCount(e.reg, "quarry_encoder_files_total", "quarry_encoder_bytes_total", "quarry_encoder_flush_seconds", "quarry_encoder_verdicts_total"); err != nil || n < 4 {
		t.Errorf("gathered %d metric series: %v", n, err)
	}

	var got []recRow
	var gotTpl []lake.TemplateRow
	for _, r := range c.accepted() {
		tenants := map[string]int{}
		for _, fi := range r.Files {
			if fi.Table == streams.TableRecords {
				if err := layout.CheckPartitionValues(fi.PartitionValues); err != nil {
					t.Errorf("%s: %v", fi.Path, err)
				}
				tenants[fi.PartitionValues["tenant"]]++
			}
			key := fi.Table + "/" + fi.Path
			data, err := e.store.Get(context.Background(), key)
			if err != nil {
				t.Fatalf("file %s of report %s: %v", key, r.ID, err)
			}
			if int64(len(data)) != fi.Size || fi.ModificationTime == 0 {
				t.Errorf("%s: size %d mtime %d, file has %d bytes", key, fi.Size, fi.ModificationTime, len(data))
			}
			checkParquetMeta(t, data, key)
			st, err := delta.ParseStats(fi.Stats)
			if err != nil {
				t.Fatalf("%s stats %q: %v", key, fi.Stats, err)
			}
			if st.NumRecords != fi.NumRecords {
				t.Errorf("%s: stats numRecords %d, file info %d", key, st.NumRecords, fi.NumRecords)
			}
			switch fi.Table {
			case streams.TableRecords:
				rows := readRecords(t, e.store, key, textsOf(bs))
				if int64(len(rows)) != fi.NumRecords {
					t.Errorf("%s: %d rows, report says %d", key, len(rows), fi.NumRecords)
				}
				lo, hi := rows[0].WALSeq, rows[0].WALSeq
				for i, row := range rows {
					lo, hi = min(lo, row.WALSeq), max(hi, row.WALSeq)
					tenant := strings.TrimPrefix(row.Source, "src-")
					if lake.FilePart(fi.PartitionValues) != layout.PartOf(tenant, row.TS*1000) {
						t.Errorf("%s: row %+v in partition %v", key, row, fi.PartitionValues)
					}
					if i > 0 && (rows[i-1].WALSeq > row.WALSeq || rows[i-1].WALSeq == row.WALSeq && rows[i-1].Index >= row.Index) {
						t.Errorf("%s: rows not sorted at %d", key, i)
					}
				}
				checkDateColumn(t, data, layout.DateColumn())
				wantPath := lake.FilePart(fi.PartitionValues).FilePath(
					lake.FileName(uint64(lo), uint64(hi), r.Encoder+"-"+strings.TrimPrefix(r.ID, r.Encoder+".")))
				if fi.Path != wantPath {
					t.Errorf("path %s, want %s", fi.Path, wantPath)
				}
				if st.MinValues["wal_seq"] != float64(lo) || st.MaxValues["wal_seq"] != float64(hi) {
					t.Errorf("%s: stats %s, want wal_seq %d..%d", key, fi.Stats, lo, hi)
				}
				got = append(got, rows...)
			case streams.TableTemplates:
				if len(fi.PartitionValues) != 0 || path.Dir(fi.Path) != "." {
					t.Errorf("templates file %s partition %v", fi.Path, fi.PartitionValues)
				}
				rows, err := parquet.Read[lake.TemplateRow](bytes.NewReader(data), int64(len(data)))
				if err != nil {
					t.Fatal(err)
				}
				gotTpl = append(gotTpl, rows...)
			}
		}
		for tn, n := range tenants {
			if !layout.Dated && n != 1 {
				t.Errorf("report %s: %d files of tenant %s, want one", r.ID, n, tn)
			}
		}
	}
	want := expectedRows(bs)
	norm := func(rows []recRow) {
		for i := range rows {
			if len(rows[i].Attrs) == 0 {
				rows[i].Attrs = nil
			}
		}
		slices.SortFunc(rows, func(a, b recRow) int {
			if a.WALSeq != b.WALSeq {
				return cmpInt(a.WALSeq, b.WALSeq)
			}
			return cmpInt(int64(a.Index), int64(b.Index))
		})
	}
	norm(got)
	norm(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows differ:\n got %+v\nwant %+v", got, want)
	}
	var wantTpl []lake.TemplateRow
	for _, b := range bs {
		for _, d := range b.Templates {
			wantTpl = append(wantTpl, lake.TemplateRow{TemplateID: int64(d.ID), Tenant: d.Tenant, Version: int32(d.Version),
				Template: d.Text, Kind: "created", WALSeq: int64(b.WALSeq)})
		}
	}
	lake.SortTemplateRows(gotTpl)
	if !reflect.DeepEqual(gotTpl, wantTpl) {
		t.Errorf("template rows differ:\n got %+v\nwant %+v", gotTpl, wantTpl)
	}
	// Two dates of acme near midnight, one date per other partition.
	parts := map[string]bool{}
	for _, r := range got {
		parts[strings.TrimPrefix(r.Source, "src-")+"/"+lake.Date(r.TS*1000)] = true
	}
	if len(parts) != 4 {
		t.Errorf("partitions %v, want 4", parts)
	}
	for _, r := range c.accepted() {
		for _, b := range r.Batches {
			if b.Seq == 8 && b.Records != 0 {
				t.Errorf("empty batch reported with %d records", b.Records)
			}
		}
	}
}

func TestFlushTriggers(t *testing.T) {
	tests := []struct {
		name    string
		cfg     func(*Config)
		publish int
		check   func(t *testing.T, r *streams.Report, waited time.Duration)
	}{
		{name: "age", publish: 1, cfg: func(c *Config) { c.MaxAge = 400 * time.Millisecond },
			check: func(t *testing.T, r *streams.Report, waited time.Duration) {
				if waited < 400*time.Millisecond {
					t.Errorf("flushed after %s, before max age", waited)
				}
			}},
		{name: "size", publish: 20, cfg: func(c *Config) { c.MaxAge = 5 * time.Minute; c.AckWait = time.Minute; c.TargetFileBytes = 4 << 10 },
			check: func(t *testing.T, r *streams.Report, _ time.Duration) {
				if len(r.Batches) >= 20 {
					t.Errorf("report covers %d batches, want a size flush before all 20", len(r.Batches))
				}
			}},
		{name: "count", publish: 7, cfg: func(c *Config) { c.MaxAge = 5 * time.Minute; c.AckWait = time.Minute; c.MaxBatches = 3 },
			check: func(t *testing.T, r *streams.Report, _ time.Duration) {
				if len(r.Batches) != 3 {
					t.Errorf("report covers %d batches, want 3", len(r.Batches))
				}
			}},
		// Input that pauses with enough buffered is flushed without waiting
		// out max_age (a backlog drained, a burst ended).
		{name: "idle", publish: 3, cfg: func(c *Config) {
			c.MaxAge, c.AckWait, c.IdleFlush, c.IdleFlushBytes = 5*time.Minute, time.Minute, 50*time.Millisecond, 1
		}, check: func(t *testing.T, r *streams.Report, _ time.Duration) {
			if len(r.Batches) == 0 {
				t.Error("idle flush reported no batch")
			}
		}},
		// A trickle, less than idle_flush_bytes, waits for max_age.
		{name: "idle, little buffered", publish: 1, cfg: func(c *Config) {
			c.MaxAge, c.IdleFlush, c.IdleFlushBytes = 400*time.Millisecond, 10*time.Millisecond, 1<<20
		}, check: func(t *testing.T, r *streams.Report, waited time.Duration) {
			if waited < 400*time.Millisecond {
				t.Errorf("flushed after %s, before max age", waited)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.committer(nil)
			cfg := fastConfig()
			tc.cfg(&cfg)
			bs := chain(1, tc.publish, 10)
			e.start(cfg, nil, nil)
			start := time.Now()
			e.publish(bs...)
			waitFor(t, 30*time.Second, "a report", func() bool { return len(c.reports()) > 0 })
			tc.check(t, c.reports()[0], time.Since(start))
		})
	}
}

func TestRejectedReport(t *testing.T) {
	e := newEnv(t)
	var first atomic.Pointer[streams.Report]
	c := e.committer(func(r *streams.Report, v *streams.Verdict) {
		if first.CompareAndSwap(nil, r) {
			// Pretend another report owns the first batch.
			v.Accepted, v.Duplicates, v.Reason = false, []uint64{r.Batches[0].Seq}, "test"
		}
	})
	bs := chain(1, 6, 3)
	e.publish(bs...)
	e.start(fastConfig(), nil, nil)
	waitFor(t, 30*time.Second, "work queue empty", func() bool { return e.queueLen() == 0 })
	r1 := first.Load()
	for _, f := range r1.Files {
		if _, err := e.store.Stat(context.Background(), f.Table+"/"+f.Path); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("file %s of the rejected report: stat err %v, want not found", f.Path, err)
		}
	}
	dup := r1.Batches[0].Seq
	var rest []uint64
	for _, s := range seqsOf(bs) {
		if s != dup {
			rest = append(rest, s)
		}
	}
	// The duplicate was acked, not re-encoded; the others were re-encoded.
	c.checkExactlyOnce(t, rest)
	var reencoded []uint64
	for _, r := range c.accepted() {
		for _, b := range r.Batches {
			reencoded = append(reencoded, b.Seq)
		}
		for _, f := range r.Files {
			if _, err := e.store.Stat(context.Background(), f.Table+"/"+f.Path); err != nil {
				t.Errorf("accepted file %s: %v", f.Path, err)
			}
		}
	}
	slices.Sort(reencoded)
	if !slices.Equal(reencoded, rest) {
		t.Errorf("re-encoded %v, want %v", reencoded, rest)
	}
}

func TestSharedConsumer(t *testing.T) {
	e := newEnv(t)
	c := e.committer(nil)
	cfg := fastConfig()
	cfg.Workers = 2
	cfg.FetchBatch = 4
	// No redelivery while the test runs, however loaded the machine (a
	// late InProgress past a 2s AckWait redelivers a batch to the other
	// encoder, which reports it again): this test is about sharing.
	cfg.AckWait = time.Minute
	cfg.Name = "one"
	e.start(cfg, e.conn(), nil)
	cfg.Name = "two"
	e.start(cfg, e.conn(), nil)
	bs := chain(1, 120, 2)
	e.publish(bs...)
	waitFor(t, 30*time.Second, "work queue empty", func() bool { return e.queueLen() == 0 })
	c.checkExactlyOnce(t, seqsOf(bs))
	writers := map[string]bool{}
	for _, r := range c.accepted() {
		writers[r.Encoder] = true
	}
	t.Logf("%d accepted reports from %d writers", len(c.accepted()), len(writers))
	if len(c.reports()) != len(c.accepted()) {
		t.Errorf("%d reports, %d accepted: no batch should be reported twice", len(c.reports()), len(c.accepted()))
	}
}

func TestWorkerKilledBeforeVerdict(t *testing.T) {
	tests := []struct {
		name string
		kill func(e *Encoder)
	}{
		{name: "crash", kill: func(e *Encoder) { e.crashNow() }},
		{name: "shutdown without drain", kill: func(e *Encoder) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			go e.Shutdown(ctx) //nolint:errcheck // forced at once: everything held is nak'ed
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			hold := make(chan struct{})
			c := e.committer(func(r *streams.Report, v *streams.Verdict) {
				if strings.HasPrefix(r.Encoder, "victim-") {
					<-hold // the victim dies before its verdict
				}
			})
			cfg := fastConfig()
			cfg.Name = "victim"
			cfg.AckWait = time.Second
			reported := make(chan struct{})
			var once atomic.Bool
			e.start(cfg, e.conn(), nil, func(enc *Encoder) {
				enc.afterReport = func(w *worker, id string) {
					if once.CompareAndSwap(false, true) {
						tc.kill(w.e)
						close(reported)
					}
				}
			})
			bs := chain(1, 10, 3)
			e.publish(bs...)
			<-reported
			close(hold)
			cfg.Name = "heir"
			e.start(cfg, e.conn(), nil)
			waitFor(t, 30*time.Second, "work queue empty", func() bool { return e.queueLen() == 0 })
			c.checkExactlyOnce(t, seqsOf(bs))
			var heir int
			for _, r := range c.reports() {
				if strings.HasPrefix(r.Encoder, "heir-") {
					heir++
				}
			}
			if heir == 0 {
				t.Error("the heir never reported: the victim's batches were not redelivered")
			}
		})
	}
}

func TestUploadFaultRetried(t *testing.T) {
	e := newEnv(t)
	c := e.committer(nil)
	faults := objstore.NewFaults(1)
	faults.Add(objstore.Rule{Op: objstore.OpPut, Times: 3})
	faults.Add(objstore.Rule{Op: objstore.OpPut, Nth: 6, LoseReply: true})
	bs := chain(1, 8, 4)
	e.publish(bs...)
	e.start(fastConfig(), nil, objstore.NewFaulty(e.store, faults))
	waitFor(t, 30*time.Second, "work queue empty", func() bool { return e.queueLen() == 0 })
	c.checkExactlyOnce(t, seqsOf(bs))
	if n := faults.Fired(objstore.OpPut); n < 4 {
		t.Errorf("%d faults fired, want 4", n)
	}
	var rows int
	for _, r := range c.accepted() {
		for _, f := range r.Files {
			if f.Table == streams.TableRecords {
				rows += len(readRecords(t, e.store, f.Table+"/"+f.Path, textsOf(bs)))
			}
		}
	}
	if rows != 8*4 {
		t.Errorf("%d rows in accepted files, want 32", rows)
	}
}

func TestMalformedDeadLettered(t *testing.T) {
	e := newEnv(t)
	c := e.committer(nil)
	bad := []struct {
		data   []byte
		format string
		reason string
	}{
		{data: []byte("not a batch"), format: streams.FormatMined, reason: "malformed"},
		{data: streams.AppendMinedBatch(nil, &streams.MinedBatch{WALSeq: 9, PrevSeq: 1, Tenant: "bad tenant"}), format: streams.FormatMined, reason: "tenant"},
		{data: streams.AppendMinedBatch(nil, batch(10, 9, "a", 1, 1)), format: streams.FormatFrame, reason: "format"},
	}
	for i, b := range bad {
		m := nats.NewMsg(streams.MinedSubject("a"))
		m.Header.Set(streams.HeaderMsgID, fmt.Sprintf("bad-%d", i))
		m.Header.Set(streams.HeaderFormat, b.format)
		m.Data = b.data
		if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	good := chain(1, 2, 1)
	e.publish(good...)
	e.start(fastConfig(), nil, nil)
	waitFor(t, 30*time.Second, "work queue empty", func() bool { return e.queueLen() == 0 })
	c.checkExactlyOnce(t, seqsOf(good))

	cons, err := e.js.OrderedConsumer(context.Background(), streams.DeadLetterStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mb, err := cons.Fetch(10, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range mb.Messages() {
		got = append(got, m)
	}
	if len(got) != len(bad) {
		t.Fatalf("%d dead letters, want %d", len(got), len(bad))
	}
	for i, m := range got {
		h := m.Headers()
		if h.Get(streams.HeaderStage) != Stage || h.Get(streams.HeaderOrigSubject) != streams.MinedSubject("a") || h.Get(streams.HeaderOrigSeq) == "" {
			t.Errorf("dead letter %d headers %v", i, h)
		}
		if r := h.Get(streams.HeaderReason); !strings.Contains(r, bad[i].reason) {
			t.Errorf("dead letter %d reason %q, want it to mention %q", i, r, bad[i].reason)
		}
		if !bytes.Equal(m.Data(), bad[i].data) {
			t.Errorf("dead letter %d payload changed", i)
		}
	}
}

func TestDrainOnShutdown(t *testing.T) {
	e := newEnv(t)
	c := e.committer(nil)
	cfg := fastConfig()
	cfg.MaxAge = time.Minute // only the drain flushes
	cfg.AckWait = 30 * time.Second
	enc, err := New(cfg, Deps{JS: e.js, Store: e.store, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	bs := chain(1, 5, 2)
	e.publish(bs...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- enc.Run(ctx) }()
	waitFor(t, 30*time.Second, "batches buffered", func() bool {
		info, err := e.js.Consumer(ctx, streams.MinedStream, streams.EncoderConsumer)
		return err == nil && info.CachedInfo().NumAckPending == len(bs)
	})
	if err := enc.Ready(); err != nil {
		t.Errorf("ready: %v", err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	if err := enc.Shutdown(sctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := enc.Shutdown(sctx); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("run: %v", err)
	}
	if e.queueLen() != 0 {
		t.Errorf("%d batches left after drain", e.queueLen())
	}
	c.checkExactlyOnce(t, seqsOf(bs))
	if enc.Ready() == nil {
		t.Error("ready after shutdown")
	}
	if err := enc.Run(ctx); !errors.Is(err, ErrRunning) {
		t.Errorf("second run: %v", err)
	}
}

func TestDrainDeadlineNaks(t *testing.T) {
	e := newEnv(t) // no committer: verdicts never come
	cfg := fastConfig()
	cfg.DrainTimeout = 500 * time.Millisecond
	cfg.VerdictTimeout = time.Second
	cfg.AckWait = time.Minute
	enc, stop := e.start(cfg, nil, nil)
	bs := chain(1, 4, 2)
	e.publish(bs...)
	waitFor(t, 30*time.Second, "verdict overdue in Ready", func() bool {
		err := enc.Ready()
		return err != nil && strings.Contains(err.Error(), "verdict")
	})
	stop()
	// Nak'ed: the batches are redelivered at once, not after the minute of
	// ack wait (a nak'ed message counts as ack pending until redelivered).
	if n := e.queueLen(); n != uint64(len(bs)) {
		t.Errorf("%d batches in the queue after the drain deadline, want %d", n, len(bs))
	}
	// A new encoder with a committer finishes the work.
	c := e.committer(nil)
	cfg.Name = "next"
	e.start(cfg, nil, nil)
	waitFor(t, 30*time.Second, "work queue empty well before the ack wait", func() bool { return e.queueLen() == 0 })
	// The first encoder's reports came first in the stream, so the
	// committer accepted them; the next encoder's copies were duplicates.
	c.checkExactlyOnce(t, seqsOf(bs))
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := Config{Name: "a.b", Workers: -1, TargetFileBytes: 10, MaxBatches: -1, MaxAge: time.Hour, AckWait: time.Millisecond,
		MaxAckPending: -1, MaxDeliver: 1, FetchBatch: -1, FetchBytes: 1, FetchWait: time.Nanosecond, MaxPendingReports: -1,
		VerdictTimeout: time.Millisecond, VerdictPoll: time.Nanosecond, UploadTimeout: time.Millisecond, DrainTimeout: -1,
		HighCompressionBelow: -5, HighCompression: "sometimes"}
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, field := range []string{"name", "workers", "target_file_bytes", "max_batches", "ack_wait", "max_ack_pending",
		"max_deliver", "fetch_batch", "fetch_bytes", "fetch_wait", "max_pending_reports", "verdict_timeout", "verdict_poll", "upload_timeout", "drain_timeout", "high_compression_below", "high_compression"} {
		if !strings.Contains(err.Error(), "encoder."+field+" ") && !strings.Contains(err.Error(), "encoder."+field+":") {
			t.Errorf("error does not mention %s: %v", field, err)
		}
	}
	if _, err := New(Config{Workers: -3}, Deps{}); err == nil || !strings.Contains(err.Error(), "workers") ||
		!strings.Contains(err.Error(), "JS") || !strings.Contains(err.Error(), "Store") {
		t.Errorf("New with bad config and deps: %v", err)
	}
	long := Config{Name: strings.Repeat("x", 97)}.Defaults()
	if err := long.Validate(); err == nil {
		t.Error("97-byte name accepted")
	}
}

func TestWriterIDs(t *testing.T) {
	a, err := New(Config{Name: "enc", Workers: 3}, Deps{JS: fakeJS{}, Store: &objstore.Local{}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New(Config{Name: "enc", Workers: 3}, Deps{JS: fakeJS{}, Store: &objstore.Local{}})
	if a.Instance() == b.Instance() {
		t.Errorf("two runs share the instance id %s", a.Instance())
	}
	for _, id := range append(a.WriterIDs(), b.WriterIDs()...) {
		if err := streams.CheckToken(id); err != nil {
			t.Errorf("writer id %q: %v", id, err)
		}
	}
	if err := a.Ready(); err == nil {
		t.Error("ready before run")
	}
}

// fakeJS satisfies the interface for tests that never call it.
type fakeJS struct{ jetstream.JetStream }

// TestLayoutLearnedAtFlush: an encoder that started before the records
// table existed partitions by tenant (the layout the committer creates);
// when the table turns out to have been created in the old (tenant, date)
// layout, its next flush re-partitions the buffered rows and writes them
// in that layout, and it keeps that layout from then on.
func TestLayoutLearnedAtFlush(t *testing.T) {
	e := newEnv(t)
	c := e.committer(nil)
	enc, stop := e.start(fastConfig(), nil, nil)
	defer stop()
	// The workers exist once the layout was read (no table: unsettled).
	waitFor(t, 30*time.Second, "workers", func() bool {
		enc.mu.Lock()
		defer enc.mu.Unlock()
		return len(enc.workers) > 0
	})
	enc.mu.Lock()
	for _, w := range enc.workers {
		if w.settled || w.layout != lake.CurrentLayout {
			t.Fatalf("worker layout %s settled %v before the table exists", w.layout, w.settled)
		}
	}
	enc.mu.Unlock()
	createDatedTable(t, e.store)
	near := time.Date(2026, 11, 29, 23, 59, 58, 0, time.UTC).UnixNano() // rows on two days
	bs := []*streams.MinedBatch{batch(1, 0, "acme", near, 4), batch(2, 1, "acme", near+int64(24*time.Hour), 2)}
	e.publish(bs...)
	waitFor(t, 30*time.Second, "work queue empty", func() bool { return e.queueLen() == 0 })
	c.checkExactlyOnce(t, seqsOf(bs))
	days := map[string]bool{}
	for _, r := range c.accepted() {
		for _, fi := range r.Files {
			if fi.Table != streams.TableRecords {
				continue
			}
			if err := lake.DatedLayout.CheckPartitionValues(fi.PartitionValues); err != nil {
				t.Errorf("%s: %v", fi.Path, err)
			}
			days[fi.PartitionValues["date"]] = true
			data, err := e.store.Get(context.Background(), fi.Table+"/"+fi.Path)
			if err != nil {
				t.Fatal(err)
			}
			checkDateColumn(t, data, false)
		}
	}
	if len(days) != 2 {
		t.Errorf("date partitions %v, want the rows' 2 days", days)
	}
}

// TestFlushKeepsRowArrays: a flush keeps its partitions' row arrays,
// cleared of the rows (so they pin no message), and the next buffer's
// partitions take them instead of growing new ones.
func TestFlushKeepsRowArrays(t *testing.T) {
	e := newEnv(t)
	c := e.committer(nil)
	cfg := fastConfig()
	cfg.MaxAge, cfg.AckWait, cfg.MaxBatches = 5*time.Minute, time.Minute, 2
	type seen struct {
		kept  []*recfile.Row // first element of each kept array after a flush
		dirty int            // kept rows still holding something
	}
	var mu sync.Mutex
	var flushes []seen
	e.start(cfg, nil, nil, func(enc *Encoder) {
		enc.afterReport = func(w *worker, id string) {
			var s seen
			for _, rows := range w.spare {
				if cap(rows) == 0 {
					continue
				}
				s.kept = append(s.kept, &rows[:1][0])
				for _, r := range rows[:cap(rows)] {
					if r.Params != nil || r.Source != "" || r.Attrs != nil {
						s.dirty++
					}
				}
			}
			mu.Lock()
			flushes = append(flushes, s)
			mu.Unlock()
		}
	})
	// Two batches of one tenant a flush, four flushes.
	var bs []*streams.MinedBatch
	ts := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixNano()
	for seq := uint64(1); seq <= 8; seq++ {
		bs = append(bs, batch(seq, seq-1, "a", ts+int64(seq)*int64(time.Minute), 20))
	}
	e.publish(bs...)
	waitFor(t, 30*time.Second, "four reports", func() bool { return len(c.reports()) >= 4 })
	c.checkExactlyOnce(t, seqsOf(bs))
	mu.Lock()
	defer mu.Unlock()
	reused := 0
	for i, s := range flushes {
		if len(s.kept) != 1 || s.dirty != 0 {
			t.Fatalf("flush %d kept %d arrays, %d rows not cleared; want 1 array, 0 rows", i, len(s.kept), s.dirty)
		}
		if i > 0 && s.kept[0] == flushes[i-1].kept[0] {
			reused++
		}
	}
	if reused == 0 {
		t.Errorf("no flush reused the row array the flush before it kept (%d flushes)", len(flushes))
	}
}

// TestPartRowsSizedByLastFlush: a new partition's row array is as large
// as the same partition's was at the last flush when no kept array is,
// instead of growing from 16 rows again (a kept array is used when one
// is large enough).
func TestPartRowsSizedByLastFlush(t *testing.T) {
	w := &worker{}
	a, b := partKey{Tenant: "a"}, partKey{Tenant: "b"}
	w.spareRows(map[partKey]*partition{
		a: {rows: make([]recfile.Row, maxSpareRows+1)}, // too large to keep
		b: {rows: make([]recfile.Row, 10, 100)},
	})
	if got := cap(w.partRows(a)); got < maxSpareRows+1 {
		t.Errorf("partition a: array of %d rows, want at least the %d of the last flush", got, maxSpareRows+1)
	}
	if got := cap(w.partRows(b)); got != 100 {
		t.Errorf("partition b: array of %d rows, want the kept array of 100", got)
	}
	if got := w.partRows(partKey{Tenant: "c"}); got != nil {
		t.Errorf("partition c, new, nothing kept: array of %d rows, want none", cap(got))
	}
}
