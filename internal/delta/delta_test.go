package delta_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/objstore/miniotest"
)

func newStore(t *testing.T) objstore.Store {
	t.Helper()
	s, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const schema = `{"type":"struct","fields":[{"name":"x","type":"long","nullable":false,"metadata":{}},{"name":"tenant","type":"string","nullable":false,"metadata":{}}]}`

func create(t *testing.T, s objstore.Store, root string) *delta.Table {
	t.Helper()
	tbl := delta.OpenTable(s, root)
	if err := tbl.Create(context.Background(), delta.Metadata{Name: root, SchemaString: schema, PartitionColumns: []string{"tenant"}}); err != nil {
		t.Fatal(err)
	}
	return tbl
}

// putFile writes a data file and returns its add action.
func putFile(t *testing.T, s objstore.Store, tbl *delta.Table, rel string, n int) delta.Add {
	t.Helper()
	data := []byte(strings.Repeat("x", n))
	if err := s.Put(context.Background(), tbl.FileKey(rel), data); err != nil {
		t.Fatal(err)
	}
	return delta.Add{Path: rel, PartitionValues: map[string]string{"tenant": "a"}, Size: int64(n),
		ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: delta.StatsJSON(int64(n), nil, nil, nil)}
}

func TestActionJSONFieldNames(t *testing.T) {
	actions := []delta.Action{
		{Protocol: &delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}},
		{MetaData: &delta.Metadata{ID: "id-1", Format: delta.Format{Provider: "parquet"}, SchemaString: schema, CreatedTime: 5}},
		{Add: &delta.Add{Path: "tenant=a b/part 1.parquet", Size: 10, ModificationTime: 7, DataChange: true, Stats: `{"numRecords":3}`}},
		{Remove: &delta.Remove{Path: "old.parquet", DeletionTimestamp: 9, DataChange: true}},
		{Txn: &delta.Txn{AppID: "quarry", Version: 42, LastUpdated: 8}},
		{CommitInfo: delta.CommitInfo{"operation": "WRITE"}},
	}
	data, err := delta.EncodeCommit(actions)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"id-1","format":{"provider":"parquet","options":{}},"schemaString":` + mustJSON(schema) + `,"partitionColumns":[],"configuration":{},"createdTime":5}}
{"add":{"path":"tenant=a%20b/part%201.parquet","partitionValues":{},"size":10,"modificationTime":7,"dataChange":true,"stats":"{\"numRecords\":3}"}}
{"remove":{"path":"old.parquet","deletionTimestamp":9,"dataChange":true}}
{"txn":{"appId":"quarry","version":42,"lastUpdated":8}}
{"commitInfo":{"operation":"WRITE"}}
`
	if string(data) != want {
		t.Fatalf("encoded:\n%s\nwant:\n%s", data, want)
	}
	got, err := delta.DecodeCommit(data)
	if err != nil {
		t.Fatal(err)
	}
	// Normalize what encoding fills in.
	actions[1].MetaData.PartitionColumns = []string{}
	actions[1].MetaData.Configuration = map[string]string{}
	actions[1].MetaData.Format.Options = map[string]string{}
	actions[2].Add.PartitionValues = map[string]string{}
	if !reflect.DeepEqual(got, actions) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", got, actions)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestDecodeForeignLog(t *testing.T) {
	// A commit as Spark writes it: unknown fields and actions are ignored.
	log := `{"commitInfo":{"timestamp":1515491537026,"operation":"WRITE","operationParameters":{"mode":"Append"},"isBlindAppend":true}}
{"add":{"path":"date=2017-12-10/part-000.c000.snappy.parquet","partitionValues":{"date":"2017-12-10"},"size":841454,"modificationTime":1512909768000,"dataChange":true,"baseRowId":4071,"stats":"{\"numRecords\":1}"}}
{"cdc":{"path":"_change_data/cdc-1.parquet","partitionValues":{},"size":1,"dataChange":false}}

{"remove":{"path":"part-00001-9.snappy.parquet","deletionTimestamp":1515488792485,"dataChange":true,"extendedFileMetadata":true,"partitionValues":{"date":"x"},"size":5}}
`
	got, err := delta.DecodeCommit([]byte(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1].Add.Size != 841454 || got[2].Remove.Size != 5 || !got[2].Remove.ExtendedFileMetadata {
		t.Fatalf("decoded %+v", got)
	}
	for _, bad := range []string{
		`{"add":{"path":"x","deletionVector":{"storageType":"u"}}}`,
		`{"add":{"path":"x"},"remove":{"path":"y"}}`,
		`{"add":null}`,
		`{"add":{"path":"x"}} {"txn":{}}`,
		`not json`,
		`{"add":{"path":"%zz"}}`,
	} {
		if _, err := delta.DecodeCommit([]byte(bad)); err == nil {
			t.Errorf("decode %s: no error", bad)
		}
	}
}

func TestCreateCommitSnapshot(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tbl := delta.OpenTable(s, "records")
	snap, err := tbl.Snapshot(ctx)
	if err != nil || snap.Version != -1 {
		t.Fatalf("empty table snapshot: %+v, %v", snap, err)
	}
	create(t, s, "records")
	if err := delta.OpenTable(s, "records").Create(ctx, delta.Metadata{SchemaString: schema}); !errors.Is(err, delta.ErrVersionExists) {
		t.Fatalf("second create: %v, want ErrVersionExists", err)
	}
	a1 := putFile(t, s, tbl, "tenant=a/f1.parquet", 10)
	a2 := putFile(t, s, tbl, "tenant=a/f2.parquet", 20)
	if err := tbl.Commit(ctx, 1, []delta.Action{{Add: &a2}, {Add: &a1}, {Txn: &delta.Txn{AppID: "quarry", Version: 100}}}); err != nil {
		t.Fatal(err)
	}
	// A fresh Table (full replay) and the cached one agree.
	for _, tb := range []*delta.Table{tbl, delta.OpenTable(s, "records")} {
		snap, err := tb.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Version != 1 || len(snap.Files) != 2 || snap.Files[0].Path != "tenant=a/f1.parquet" || snap.Txns["quarry"] != 100 {
			t.Fatalf("snapshot after adds: %+v", snap)
		}
		if !reflect.DeepEqual(snap.Protocol, delta.DefaultProtocol) || snap.Metadata.Format.Provider != "parquet" || snap.Metadata.ID == "" ||
			!reflect.DeepEqual(snap.Metadata.PartitionColumns, []string{"tenant"}) {
			t.Fatalf("snapshot metadata: %+v %+v", snap.Protocol, snap.Metadata)
		}
		if snap.CommitInfo["txnId"] == nil {
			t.Fatalf("commitInfo without txnId: %v", snap.CommitInfo)
		}
	}
	a3 := putFile(t, s, tbl, "tenant=a/f3.parquet", 30)
	if err := tbl.Commit(ctx, 2, []delta.Action{
		{Remove: &delta.Remove{Path: a1.Path, DeletionTimestamp: time.Now().UnixMilli(), DataChange: true}},
		{Add: &a3},
		{Txn: &delta.Txn{AppID: "quarry", Version: 200}},
		{CommitInfo: delta.CommitInfo{"operation": "WRITE"}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, tb := range []*delta.Table{tbl, delta.OpenTable(s, "records")} {
		snap, err = tb.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, f := range snap.Files {
			paths = append(paths, f.Path)
		}
		if snap.Version != 2 || fmt.Sprint(paths) != "[tenant=a/f2.parquet tenant=a/f3.parquet]" ||
			len(snap.Tombstones) != 1 || snap.Tombstones[0].Path != a1.Path || snap.Txns["quarry"] != 200 ||
			snap.CommitInfo["operation"] != "WRITE" {
			t.Fatalf("snapshot after remove: %+v", snap)
		}
	}
	if err := delta.ValidateLog(ctx, s, "records"); err != nil {
		t.Fatalf("validate: %v", err)
	}
	refs, err := tbl.ReferencedFiles(ctx)
	if err != nil || len(refs) != 3 {
		t.Fatalf("referenced files: %v, %v", refs, err)
	}
	// Committing a version that exists fails; the table is unchanged.
	if err := tbl.Commit(ctx, 2, []delta.Action{{Txn: &delta.Txn{AppID: "quarry", Version: 300}}}); !errors.Is(err, delta.ErrVersionExists) {
		t.Fatalf("commit existing version: %v", err)
	}
}

func TestCommitRejectsBadCommits(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tbl := delta.OpenTable(s, "t")
	add := delta.Add{Path: "f", Size: 1}
	for name, c := range map[string]struct {
		v       int64
		actions []delta.Action
	}{
		"version 0 without metadata": {0, []delta.Action{{Protocol: &delta.DefaultProtocol}}},
		"two metadata":               {1, []delta.Action{{MetaData: &delta.Metadata{ID: "a"}}, {MetaData: &delta.Metadata{ID: "b"}}}},
		"duplicate add":              {1, []delta.Action{{Add: &add}, {Add: &add}}},
		"two txn one app":            {1, []delta.Action{{Txn: &delta.Txn{AppID: "q"}}, {Txn: &delta.Txn{AppID: "q"}}}},
		"empty action":               {1, []delta.Action{{}}},
		"log path":                   {1, []delta.Action{{Add: &delta.Add{Path: "_delta_log/x"}}}},
		"parent path":                {1, []delta.Action{{Add: &delta.Add{Path: "../x"}}}},
		"absolute path":              {1, []delta.Action{{Add: &delta.Add{Path: "s3://b/x"}}}},
		"negative version":           {-1, nil},
	} {
		if err := tbl.Commit(ctx, c.v, c.actions); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if l, _ := s.List(ctx, ""); len(l) != 0 {
		t.Fatalf("rejected commits wrote %v", l)
	}
}

func TestConcurrentCommitOneWins(t *testing.T) {
	ctx := context.Background()
	for _, stores := range []struct {
		name string
		wrap func(objstore.Store) objstore.Store
	}{
		{"local", func(s objstore.Store) objstore.Store { return s }},
		{"faulty-delays", func(s objstore.Store) objstore.Store {
			f := objstore.NewFaults(3)
			f.Add(objstore.Rule{Op: objstore.OpPutIfAbsent, Prob: 0.5, Delay: time.Millisecond})
			return objstore.NewFaulty(s, f)
		}},
	} {
		t.Run(stores.name, func(t *testing.T) {
			s := stores.wrap(newStore(t))
			create(t, s, "t")
			for v := int64(1); v <= 10; v++ {
				const n = 4
				var wg sync.WaitGroup
				errs := make([]error, n)
				for i := range n {
					wg.Go(func() {
						tbl := delta.OpenTable(s, "t")
						errs[i] = tbl.Commit(ctx, v, []delta.Action{{Txn: &delta.Txn{AppID: "quarry", Version: v*10 + int64(i)}}})
					})
				}
				wg.Wait()
				winners := 0
				winner := -1
				for i, err := range errs {
					if err == nil {
						winners++
						winner = i
					} else if !errors.Is(err, delta.ErrVersionExists) {
						t.Fatalf("version %d writer %d: %v", v, i, err)
					}
				}
				if winners != 1 {
					t.Fatalf("version %d: %d winners", v, winners)
				}
				snap, err := delta.OpenTable(s, "t").Snapshot(ctx)
				if err != nil || snap.Txns["quarry"] != v*10+int64(winner) {
					t.Fatalf("version %d: txn %d, winner %d, %v", v, snap.Txns["quarry"], winner, err)
				}
			}
		})
	}
}

func TestCommitSurvivesLostReply(t *testing.T) {
	ctx := context.Background()
	inner := newStore(t)
	create(t, inner, "t")
	f := objstore.NewFaults(1)
	s := objstore.NewFaulty(inner, f)
	tbl := delta.OpenTable(s, "t")
	// The write lands but the writer hears an error: the retry finds its own
	// bytes and reports success.
	f.Add(objstore.Rule{Op: objstore.OpPutIfAbsent, LoseReply: true, Times: 1})
	if err := tbl.Commit(ctx, 1, []delta.Action{{Txn: &delta.Txn{AppID: "quarry", Version: 1}}}); err != nil {
		t.Fatalf("commit with a lost reply: %v", err)
	}
	// A plain failure (nothing written) is retried.
	f.Add(objstore.Rule{Op: objstore.OpPutIfAbsent, Times: 2})
	if err := tbl.Commit(ctx, 2, []delta.Action{{Txn: &delta.Txn{AppID: "quarry", Version: 2}}}); err != nil {
		t.Fatalf("commit with transient failures: %v", err)
	}
	// A store that keeps failing yields the error, not ErrVersionExists.
	f.Add(objstore.Rule{Op: objstore.OpPutIfAbsent})
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := tbl.Commit(cctx, 3, []delta.Action{{Txn: &delta.Txn{AppID: "quarry", Version: 3}}})
	if err == nil || errors.Is(err, delta.ErrVersionExists) || !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("commit on a broken store: %v", err)
	}
	snap, err := delta.OpenTable(inner, "t").Snapshot(ctx)
	if err != nil || snap.Version != 2 || snap.Txns["quarry"] != 2 {
		t.Fatalf("snapshot: %+v, %v", snap, err)
	}
}

func TestSnapshotRejectsNewerProtocols(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tbl := delta.OpenTable(s, "t")
	if err := tbl.Commit(ctx, 0, []delta.Action{
		{Protocol: &delta.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}}},
		{MetaData: &delta.Metadata{ID: "x", SchemaString: schema}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Snapshot(ctx); !errors.Is(err, delta.ErrUnsupported) {
		t.Fatalf("snapshot of a reader-3 table: %v", err)
	}
	s2 := newStore(t)
	t2 := delta.OpenTable(s2, "t")
	if err := t2.Commit(ctx, 0, []delta.Action{{Protocol: &delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 4}}, {MetaData: &delta.Metadata{ID: "x", SchemaString: schema}}}); err != nil {
		t.Fatal(err)
	}
	snap, err := t2.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Writable(); !errors.Is(err, delta.ErrUnsupported) {
		t.Fatalf("writable on writer-4 table: %v", err)
	}
}

func TestStatsJSON(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 678_901_000, time.FixedZone("x", 3600))
	got := delta.StatsJSON(5, map[string]any{"wal_seq": int64(1), "ts": ts, "source": "a"},
		map[string]any{"wal_seq": int64(9), "ts": ts}, map[string]int64{"attrs": 2})
	want := `{"numRecords":5,"minValues":{"source":"a","ts":"2026-01-02T02:04:05.678Z","wal_seq":1},"maxValues":{"ts":"2026-01-02T02:04:05.678Z","wal_seq":9},"nullCount":{"attrs":2}}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	st, err := delta.ParseStats(got)
	if err != nil || st.NumRecords != 5 || st.NullCount["attrs"] != 2 {
		t.Fatalf("parse: %+v, %v", st, err)
	}
	if got := delta.StatsJSON(0, nil, nil, nil); got != `{"numRecords":0}` {
		t.Fatalf("empty stats: %s", got)
	}
}

func TestValidateLogFindsCorruption(t *testing.T) {
	ctx := context.Background()
	// build makes a valid 3-version table and returns its store.
	build := func(t *testing.T) (objstore.Store, *delta.Table) {
		s := newStore(t)
		tbl := create(t, s, "t")
		a := putFile(t, s, tbl, "a.parquet", 3)
		b := putFile(t, s, tbl, "b.parquet", 4)
		if err := tbl.Commit(ctx, 1, []delta.Action{{Add: &a}}); err != nil {
			t.Fatal(err)
		}
		if err := tbl.Commit(ctx, 2, []delta.Action{{Add: &b}}); err != nil {
			t.Fatal(err)
		}
		if err := delta.ValidateLog(ctx, s, "t"); err != nil {
			t.Fatalf("valid log: %v", err)
		}
		return s, tbl
	}
	for _, c := range []struct {
		name    string
		corrupt func(t *testing.T, s objstore.Store, tbl *delta.Table)
		want    string
	}{
		{"missing version", func(t *testing.T, s objstore.Store, tbl *delta.Table) {
			must(t, s.Delete(ctx, tbl.CommitKey(1)))
		}, "version 1 missing"},
		{"bad json", func(t *testing.T, s objstore.Store, tbl *delta.Table) {
			must(t, s.Put(ctx, tbl.CommitKey(2), []byte("{\"add\":{\"path\":\n")))
		}, "version 2"},
		{"missing file", func(t *testing.T, s objstore.Store, tbl *delta.Table) {
			must(t, s.Delete(ctx, tbl.FileKey("a.parquet")))
		}, "a.parquet is missing"},
		{"wrong size", func(t *testing.T, s objstore.Store, tbl *delta.Table) {
			must(t, s.Put(ctx, tbl.FileKey("b.parquet"), []byte("12345678")))
		}, "has 8 bytes"},
		{"duplicate add", func(t *testing.T, s objstore.Store, tbl *delta.Table) {
			a := delta.Add{Path: "a.parquet", Size: 3, DataChange: true}
			must(t, tbl.Commit(ctx, 3, []delta.Action{{Add: &a}}))
		}, "already active"},
		{"first version without metadata", func(t *testing.T, s objstore.Store, tbl *delta.Table) {
			must(t, s.Put(ctx, tbl.CommitKey(0), []byte(`{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}`+"\n")))
		}, "version 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, tbl := build(t)
			c.corrupt(t, s, tbl)
			err := delta.ValidateLog(ctx, s, "t")
			if err == nil || !errors.Is(err, delta.ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("validate: %v, want ErrCorrupt mentioning %q", err, c.want)
			}
		})
	}
	// A missing middle version also stops Snapshot.
	s, tbl := build(t)
	must(t, s.Delete(ctx, tbl.CommitKey(1)))
	if _, err := delta.OpenTable(s, "t").Snapshot(ctx); !errors.Is(err, delta.ErrCorrupt) {
		t.Fatalf("snapshot with a gap: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentCommitOnMinIO races writers for each version on a real S3
// server (If-None-Match: *): exactly one wins every version.
func TestConcurrentCommitOnMinIO(t *testing.T) {
	ctx := context.Background()
	endpoint, ak, sk := miniotest.Start(t)
	miniotest.MakeBucket(t, endpoint, ak, sk, "lake")
	s, err := objstore.Open(ctx, "s3://lake/x", objstore.S3Options{Endpoint: endpoint, AccessKey: ak, SecretKey: sk})
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, "t")
	for v := int64(1); v <= 5; v++ {
		const n = 3
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				errs[i] = delta.OpenTable(s, "t").Commit(ctx, v, []delta.Action{{Txn: &delta.Txn{AppID: "quarry", Version: v*10 + int64(i)}}})
			})
		}
		wg.Wait()
		winners := 0
		for i, err := range errs {
			if err == nil {
				winners++
			} else if !errors.Is(err, delta.ErrVersionExists) {
				t.Fatalf("version %d writer %d: %v", v, i, err)
			}
		}
		if winners != 1 {
			t.Fatalf("version %d: %d winners", v, winners)
		}
	}
	if err := delta.ValidateLog(ctx, s, "t"); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeCommitLines(t *testing.T) {
	add := `{"add":{"path":"a.parquet","size":1,"dataChange":true}}`
	txn := `{"txn":{"appId":"q","version":3}}`
	for _, tc := range []struct {
		name string
		log  string
		want int
	}{
		{"newline ended", add + "\n" + txn + "\n", 2},
		{"last line unended", add + "\n" + txn, 2},
		{"crlf", add + "\r\n" + txn + "\r\n", 2},
		{"blank and spaced lines", "\n  \n" + add + "\n\t\n " + txn + " \n\n", 2},
		{"empty", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := delta.DecodeCommit([]byte(tc.log))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Fatalf("%d actions, want %d: %+v", len(got), tc.want, got)
			}
			if tc.want == 2 && (got[0].Add == nil || got[0].Add.Path != "a.parquet" || got[1].Txn == nil || got[1].Txn.Version != 3) {
				t.Fatalf("decoded %+v", got)
			}
		})
	}
	// A line over 64 MiB is refused, with its number.
	long := []byte(add + "\n" + `{"commitInfo":{"x":"` + strings.Repeat("a", 64<<20) + `"}}` + "\n")
	if _, err := delta.DecodeCommit(long); !errors.Is(err, delta.ErrLineTooLong) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("long line: %v", err)
	}
}

func TestDecodeCommitAllocs(t *testing.T) {
	// A small commit is decoded without a 64 KiB line buffer (what a
	// bufio.Scanner took per commit): reading a log of many small commits
	// was mostly that buffer.
	data := []byte(`{"add":{"path":"a.parquet","size":1,"dataChange":true}}` + "\n")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := delta.DecodeCommit(data); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 100; per > 16<<10 {
		t.Fatalf("%d bytes allocated per small commit", per)
	}
}
