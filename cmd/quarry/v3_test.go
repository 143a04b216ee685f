package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/laketest"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/pqtest"
)

// TestRunEveryByteKept feeds lines with timestamps, a continuation line and
// bytes that are not UTF-8 through `quarry run --input` and reads them back
// with `quarry query --format raw`: every line, byte for byte.
func TestRunEveryByteKept(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	valid := []string{
		"2026-11-29T00:00:00.010Z INFO service started on port 8080",
		"2026-11-29T00:00:01.020Z WARN slow request 350 ms from 10.0.0.7",
		"2015-10-18 18:01:47,978 ERROR java.lang.NullPointerException",
		"\tat org.example.Main.run(Main.java:42)",
		"081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 for block blk_38865049064139660 terminating",
		"Jun 14 15:16:01 combo sshd(pam_unix)[19939]: authentication failure; logname= uid=0 euid=0 tty=NODEVssh ruser= rhost=218.188.2.4",
	}
	invalid := []string{
		"2026-11-29T00:00:02.000Z INFO user caf\xe9 logged in",
		"binary \xff\xfe\x00 tail",
	}
	lines := append(append([]string{}, valid...), invalid...)
	in := filepath.Join(dir, "in.log")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runCLI(t, "", "run", "--data", data, "--input", in, "--tenant", "acme", "--timeout", "5m")
	raw, _ := runCLI(t, "", "query", "--lake", filepath.Join(data, "lake"), "--format", "raw")
	got := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(raw, "\n"), "\n") {
		got[l] = true
	}
	for _, l := range valid {
		if !got[l] {
			t.Errorf("line %q missing from the lake; query printed:\n%s", l, raw)
		}
	}
	var lost []string
	for _, l := range invalid {
		if !got[l] {
			lost = append(lost, l)
		}
	}
	if len(got) != len(lines)-len(lost) {
		t.Errorf("%d distinct lines in the lake, want %d", len(got), len(lines)-len(lost))
	}
	if len(lost) > 0 {
		t.Errorf("%d lines that are not UTF-8 did not reach the lake: %q", len(lost), lost)
	}
}

// TestRunOnV2Lake: a lake whose records table was created with the records
// v2 schema and holds v2 files gets the superset schema (one metaData
// action) when `quarry run` commits to it, and `quarry query --format raw`
// then returns the old lines and the new (records v3) ones exactly. The
// table keeps its old layout (partitioned by tenant and date): the run's
// files go to date partitions, without a date column.
func TestRunOnV2Lake(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	lakeDir := filepath.Join(data, "lake")
	if err := os.MkdirAll(lakeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	store, err := objstore.NewLocal(lakeDir)
	if err != nil {
		t.Fatal(err)
	}
	rec, tpl := delta.OpenTable(store, lake.RecordsTable), delta.OpenTable(store, lake.TemplatesTable)
	if err := rec.Create(ctx, delta.Metadata{Name: lake.RecordsTable, SchemaString: lake.RecordsSchemaV2String, PartitionColumns: lake.DatedLayout.PartitionColumns()}); err != nil {
		t.Fatal(err)
	}
	if err := tpl.Create(ctx, delta.Metadata{Name: lake.TemplatesTable, SchemaString: lake.TemplatesSchemaV1String}); err != nil {
		t.Fatal(err)
	}
	put := func(tb *delta.Table, rel string, parts map[string]string, n int, data []byte) {
		t.Helper()
		if err := store.Put(ctx, tb.FileKey(rel), data); err != nil {
			t.Fatal(err)
		}
		snap, err := tb.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		add := delta.Add{Path: rel, PartitionValues: parts, Size: int64(len(data)), ModificationTime: time.Now().UnixMilli(),
			DataChange: true, Stats: delta.StatsJSON(int64(n), nil, nil, nil)}
		if err := tb.Commit(ctx, snap.Version+1, []delta.Action{{Add: &add}}); err != nil {
			t.Fatal(err)
		}
	}
	const oldID = 1 << 40 // far from the ids the run's miner assigns
	// A templates file as written before the kinds column.
	type templateRowV1 struct {
		TemplateID int64  `parquet:"template_id"`
		Tenant     string `parquet:"tenant"`
		Version    int32  `parquet:"version"`
		Template   string `parquet:"template"`
		Kind       string `parquet:"kind"`
		Previous   string `parquet:"previous"`
		MergedInto int64  `parquet:"merged_into"`
		WALSeq     int64  `parquet:"wal_seq"`
	}
	put(tpl, lake.FileName(1, 1, "old"), map[string]string{}, 1, pqtest.Write(t, []templateRowV1{
		{TemplateID: oldID, Tenant: "legacy", Version: 1, Template: "legacy <*> line <*>", Kind: "created", WALSeq: 1}}))
	at := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	var old []lake.RecordRow
	var want []string
	for i := range 3 {
		old = append(old, lake.RecordRow{WALSeq: 1, RecordIndex: int32(i), TS: at, TemplateID: oldID, TemplateVersion: 1,
			Params: []string{fmt.Sprint("v2-", i), "ü"}, Source: "old"})
		want = append(want, fmt.Sprintf("legacy v2-%d line ü", i))
	}
	put(rec, lake.RecordsFilePath("legacy", "2025-05-01", lake.FileName(1, 1, "old")), map[string]string{"tenant": "legacy", "date": "2025-05-01"}, 3, pqtest.Write(t, old))

	newLines := []string{"2026-11-29T00:00:00.010Z INFO service started on port 8080", "2026-11-29T00:00:01.020Z WARN slow request 350 ms",
		"\tat org.example.Main.run(Main.java:42)"}
	want = append(want, newLines...)
	in := filepath.Join(dir, "in.log")
	if err := os.WriteFile(in, []byte(strings.Join(newLines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runCLI(t, "", "run", "--data", data, "--input", in, "--tenant", "acme", "--timeout", "5m")

	snap, err := rec.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Metadata.SchemaString != lake.RecordsSchemaString() {
		t.Errorf("records schema after the run is not the superset: %s", snap.Metadata.SchemaString)
	}
	if l := lake.LayoutOf(snap.Metadata); !l.Dated {
		t.Errorf("the old lake's layout changed to %s", l)
	}
	for _, f := range snap.Files {
		if err := lake.DatedLayout.CheckPartitionValues(f.PartitionValues); err != nil || !strings.Contains(f.Path, "/date=") {
			t.Errorf("file %s in the old lake: %v", f.Path, err)
		}
	}
	if tsnap, err := tpl.Snapshot(ctx); err != nil || tsnap.Metadata.SchemaString != lake.TemplatesSchemaString {
		t.Errorf("templates schema after the run is not the current one (%v): %s", err, tsnap.Metadata.SchemaString)
	}
	raw, _ := runCLI(t, "", "query", "--lake", lakeDir, "--format", "raw")
	got := strings.Split(strings.TrimSuffix(raw, "\n"), "\n")
	if d := laketest.Diff(got, want); d != "" {
		t.Errorf("query: %s", d)
	}
	if err := laketest.CheckWithArrow(ctx, store); err != nil {
		t.Errorf("arrow-go cross-check: %v", err)
	}
}
