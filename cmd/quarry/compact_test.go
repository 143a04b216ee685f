package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/laketest"
	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/pqtest"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/streams"
)

func compactRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code = runMain(context.Background(), e, append([]string{"compact"}, args...))
	return code, out.String(), errb.String()
}

func TestCompactBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--lake", t.TempDir(), "--date", "2026-13-01", "--nats", "nats://x"}, `--date "2026-13-01"`},
		{[]string{"--lake", t.TempDir()}, "--nats is required"},
		{[]string{"--bogus"}, "flag provided but not defined"},
	} {
		code, out, errs := compactRun(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.msg) || out != "" {
			t.Errorf("quarry compact %v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", tc.args, code, out, errs, tc.msg)
		}
	}
}

// TestCompactCommand compacts a lake of six small files of an ended date
// into one, keeping every line; with the lease held by a live committer it
// refuses and changes nothing.
func TestCompactCommand(t *testing.T) {
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	ctx := context.Background()
	dir := t.TempDir()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec, tpl := delta.OpenTable(store, lake.RecordsTable), delta.OpenTable(store, lake.TemplatesTable)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tpl.Create(ctx, delta.Metadata{SchemaString: lake.TemplatesSchemaString, PartitionColumns: []string{}}))
	must(rec.Create(ctx, delta.Metadata{SchemaString: lake.RecordsSchemaString(), PartitionColumns: lake.DatedLayout.PartitionColumns()}))
	texts := recfile.Templates{{ID: 1, Version: 1}: "<*> took <*> ms"}
	tdata := pqtest.Write(t, []lake.TemplateRow{{TemplateID: 1, Tenant: "acme", Version: 1, Template: "<*> took <*> ms", Kind: "created", WALSeq: 1}})
	must(store.Put(ctx, "templates/t.parquet", tdata))
	must(tpl.Commit(ctx, 1, []delta.Action{{Add: &delta.Add{Path: "t.parquet", Size: int64(len(tdata)), DataChange: true, Stats: delta.StatsJSON(1, nil, nil, nil)}}}))
	var want []string
	for s := uint64(1); s <= 6; s++ {
		ts := time.Date(2026, 1, 2, 3, 4, int(s), 0, time.UTC)
		params := []string{ts.Format(time.RFC3339), fmt.Sprint(s * 11)}
		want = append(want, params[0]+" took "+params[1]+" ms")
		f, err := recfile.Encode([]recfile.Row{{WALSeq: s, TS: ts.UnixNano(), TemplateID: 1, TemplateVersion: 1, Params: params, Source: "s"}}, texts)
		must(err)
		p := lake.RecordsFilePath("acme", "2026-01-02", lake.FileName(s, s, "e1"))
		must(store.Put(ctx, "records/"+p, f.Data))
		must(rec.Commit(ctx, int64(s), []delta.Action{
			{Add: &delta.Add{Path: p, PartitionValues: map[string]string{"tenant": "acme", "date": "2026-01-02"}, Size: int64(len(f.Data)),
				ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: f.Stats, Tags: map[string]string{"quarry.report": fmt.Sprint("e1.", s)}}},
			{Txn: &delta.Txn{AppID: lake.AppID, Version: int64(s)}},
		}))
	}
	files := func() int {
		snap, err := delta.OpenTable(store, lake.RecordsTable).Snapshot(ctx)
		must(err)
		return len(snap.Files)
	}

	// A live committer's lease: refused, nothing changed.
	kv, err := js.KeyValue(ctx, streams.StateBucket)
	must(err)
	_, err = kv.Create(ctx, streams.KeyLease, []byte(fmt.Sprintf(`{"holder":"c1","expires_at":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano))))
	must(err)
	code, out, errs := compactRun(t, "--lake", dir, "--nats", srv.URL())
	if code != 1 || !strings.Contains(errs, "lease is held") || files() != 6 {
		t.Fatalf("with a held lease: exit %d, stdout %q, stderr %q, %d files", code, out, errs, files())
	}
	must(kv.Delete(ctx, streams.KeyLease))

	code, out, errs = compactRun(t, "--lake", dir, "--nats", srv.URL(), "--tenant", "acme")
	if code != 0 || !strings.Contains(out, "compacted 1 partitions: 6 files into 1") || files() != 1 {
		t.Fatalf("compact: exit %d, stdout %q, stderr %q, %d files", code, out, errs, files())
	}
	got, err := laketest.Lines(ctx, store)
	must(err)
	if d := laketest.Diff(got, want); d != "" {
		t.Fatalf("lines after compaction:\n%s", d)
	}
	if hw, err := lake.HighWater(ctx, store); err != nil || hw != 6 {
		t.Fatalf("high-water after compaction %d, %v", hw, err)
	}
	must(laketest.CheckWithArrow(ctx, store))
	// The lease is released: a committer can take it at once.
	if _, err := kv.Get(ctx, streams.KeyLease); err == nil {
		t.Fatal("quarry compact left the lease behind")
	}
}
