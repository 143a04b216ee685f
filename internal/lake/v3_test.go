package lake_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/laketest"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/recfile"
	"github.com/quarrylake/quarry/streams"
)

// v3File uploads rows as a records v3 file (encoded with opts) and
// returns the add.
func (f *fixture) v3File(tenant, date, writer string, rows []recfile.Row, tpl recfile.Templates, opts ...recfile.Option) delta.Add {
	f.t.Helper()
	file, err := recfile.Encode(rows, tpl, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	first, last := rows[0].WALSeq, rows[0].WALSeq
	for _, r := range rows {
		first, last = min(first, r.WALSeq), max(last, r.WALSeq)
	}
	rel := lake.RecordsFilePath(tenant, date, lake.FileName(first, last, writer))
	if err := f.store.Put(f.ctx, f.rec.FileKey(rel), file.Data); err != nil {
		f.t.Fatal(err)
	}
	return delta.Add{Path: rel, PartitionValues: map[string]string{"tenant": tenant, "date": date}, Size: int64(len(file.Data)),
		ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: file.Stats}
}

// TestOldAndNewFiles: a lake created with the records v2 schema and v2
// files, then upgraded (one metaData action) and appended v3 files, reads
// every line exactly, in WAL order, through Query; the Arrow cross-check
// accepts both kinds of file under the superset schema; Templates counts
// the records of both.
func TestOldAndNewFiles(t *testing.T) {
	s, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: t.Context(), store: s, rec: delta.OpenTable(s, lake.RecordsTable), tpl: delta.OpenTable(s, lake.TemplatesTable)}
	if err := f.rec.Create(f.ctx, delta.Metadata{Name: "records", SchemaString: lake.RecordsSchemaV2String, PartitionColumns: lake.DatedLayout.PartitionColumns()}); err != nil {
		t.Fatal(err)
	}
	if err := f.tpl.Create(f.ctx, delta.Metadata{Name: "templates", SchemaString: lake.TemplatesSchemaString}); err != nil {
		t.Fatal(err)
	}
	texts := recfile.Templates{
		{ID: 1, Version: 1}: "GET <*> <*>",
		{ID: 2, Version: 1}: "<*> <*> INFO dfs.DataNode: served <*> to <*>",
		{ID: 3, Version: 1}: "<*>",
	}
	var tplRows []lake.TemplateRow
	for k, text := range texts {
		tplRows = append(tplRows, lake.TemplateRow{TemplateID: int64(k.ID), Tenant: "acme", Version: int32(k.Version), Template: text, Kind: "created", WALSeq: 1})
	}
	f.commit(f.tpl, 1, f.templatesFile("w1", tplRows))

	// v2: WAL 1 and 3.
	v2 := []lake.RecordRow{rec(1, 0, "2026-01-01T10:00:00Z", 1, 1, "/a", "200"), rec(1, 1, "2026-01-01T10:00:01Z", 1, 1, "/b", "404"),
		rec(3, 0, "2026-01-01T10:00:03Z", 3, 1, "plain old line")}
	f.commit(f.rec, 3, f.recordsFile("acme", "2026-01-01", "w1", v2))

	snap, err := f.rec.Snapshot(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, ok := lake.RecordsSchemaUpdate(snap.Metadata)
	if !ok {
		t.Fatal("a v2 schema needs no update")
	}
	if err := f.rec.Commit(f.ctx, snap.Version+1, []delta.Action{{MetaData: &md}}); err != nil {
		t.Fatal(err)
	}
	if _, again := lake.RecordsSchemaUpdate(md); again {
		t.Fatal("the superset schema asks for another update")
	}

	// v3: WAL 2 and 4, between and after the v2 rows; a timestamp, a
	// continuation line, bytes that are not UTF-8.
	at := time.Date(2026, 1, 1, 10, 0, 2, 10_000_000, time.UTC).UnixNano()
	v3 := []recfile.Row{
		{WALSeq: 2, Index: 0, TS: at, TemplateID: 2, TemplateVersion: 1, Source: "src",
			Params: []string{"081109", "203615", "blk_-1608999687919862906", "/10.250.19.102"}},
		{WALSeq: 2, Index: 1, TS: at, TemplateID: 3, TemplateVersion: 1, Source: "src", Params: []string{"\tat java.lang.Thread.run(Thread.java:745)"}},
		{WALSeq: 2, Index: 2, TS: at, TemplateID: 3, TemplateVersion: 1, Source: "src", Params: []string{"caf\xe9 \xff\xfe binary"}},
		{WALSeq: 4, Index: 0, TS: at + 2e9, TemplateID: 1, TemplateVersion: 1, Source: "src", Params: []string{"/c", "500"},
			Attrs: []streams.Attr{{Key: "host", Value: "h2"}}},
	}
	f.commit(f.rec, 4, f.v3File("acme", "2026-01-01", "w2", v3, texts))

	want := []string{"GET /a 200", "GET /b 404", "081109 203615 INFO dfs.DataNode: served blk_-1608999687919862906 to /10.250.19.102",
		"\tat java.lang.Thread.run(Thread.java:745)", "caf\xe9 \xff\xfe binary", "plain old line", "GET /c 500"}
	var got []lake.Record
	if err := lake.Open(s).Query(f.ctx, lake.Filter{}, func(r lake.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(got), len(want), got)
	}
	for i, r := range got {
		if r.Line != want[i] {
			t.Errorf("record %d (wal %d index %d): line %q, want %q", i, r.WALSeq, r.Index, r.Line, want[i])
		}
	}
	if g := got[6]; strings.Join(g.Params, "|") != "/c|500" || g.Attrs["host"] != "h2" || !g.TS.Equal(time.Unix(0, at+2e9)) {
		t.Errorf("v3 record %+v: params, attrs or ts wrong", g)
	}
	if g := got[0]; strings.Join(g.Params, "|") != "/a|200" || g.Attrs["host"] != "h1" {
		t.Errorf("v2 record %+v: params or attrs wrong", g)
	}
	lines, err := laketest.Lines(f.ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if d := laketest.Diff(lines, want); d != "" {
		t.Error(d)
	}
	if err := laketest.CheckWithArrow(f.ctx, s); err != nil {
		t.Errorf("arrow: %v", err)
	}
	infos, err := lake.Open(s).Templates(f.ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	counts := map[uint64]int64{}
	for _, ti := range infos {
		counts[ti.TemplateID] = ti.Records
	}
	if counts[1] != 3 || counts[2] != 1 || counts[3] != 3 {
		t.Errorf("template record counts %v, want 1:3 2:1 3:3", counts)
	}

	// A v3 file whose template the templates table lacks: ErrTemplateMissing.
	f.commit(f.rec, 5, f.v3File("acme", "2026-01-02", "w3", []recfile.Row{{WALSeq: 5, TS: at + 86400e9, TemplateID: 9, TemplateVersion: 1,
		Source: "src", Params: []string{"x"}}}, recfile.Templates{{ID: 9, Version: 1}: "lost <*>"}))
	err = lake.Open(s).Query(f.ctx, lake.Filter{}, func(lake.Record) error { return nil })
	if !errors.Is(err, lake.ErrTemplateMissing) {
		t.Errorf("query with a template missing: %v, want ErrTemplateMissing", err)
	}
}

// TestRecordsV7Upgrade: RecordsSchemaV6String is the schema tables were
// created with from records v3 to v6 (its hash frozen from that code), a
// table of it gets RecordsSchemaString (with more_text) by one metaData
// action, and a records v7 file (more_text) in it reads back exactly
// through Query and is accepted by the Arrow cross-check, which fails it
// under the old schema.
func TestRecordsV7Upgrade(t *testing.T) {
	const v6Hash = "e9192a03f144dae19d018ca45dd4c81e2abfd21133692b2db1c05b680d069f4c" // RecordsSchemaString at e413399
	if h := fmt.Sprintf("%x", sha256.Sum256([]byte(lake.RecordsSchemaV6String()))); h != v6Hash {
		t.Fatalf("RecordsSchemaV6String changed: sha256 %s, want %s", h, v6Hash)
	}
	if strings.Contains(lake.RecordsSchemaV6String(), "more_text") || !strings.Contains(lake.RecordsSchemaString(), `"name":"more_text","type":"binary","nullable":true`) {
		t.Fatal("more_text: not in the current schema only")
	}
	s, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: t.Context(), store: s, rec: delta.OpenTable(s, lake.RecordsTable), tpl: delta.OpenTable(s, lake.TemplatesTable)}
	if err := f.rec.Create(f.ctx, delta.Metadata{Name: "records", SchemaString: lake.RecordsSchemaV6String(), PartitionColumns: lake.DatedLayout.PartitionColumns()}); err != nil {
		t.Fatal(err)
	}
	if err := f.tpl.Create(f.ctx, delta.Metadata{Name: "templates", SchemaString: lake.TemplatesSchemaString}); err != nil {
		t.Fatal(err)
	}
	// 40 parameters: the 33rd and later have no column, so a file written
	// at zstd's best level has more_text.
	text := "event" + strings.Repeat(" <*>", 40)
	texts := recfile.Templates{{ID: 1, Version: 1}: text}
	f.commit(f.tpl, 1, f.templatesFile("w1", []lake.TemplateRow{{TemplateID: 1, Tenant: "acme", Version: 1, Template: text, Kind: "created", WALSeq: 1}}))
	at := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).UnixNano()
	var rows []recfile.Row
	var want []string
	for i := range 50 {
		params := make([]string, 40)
		for j := range params {
			params[j] = fmt.Sprintf("v%d.%d", i, j*j%7)
		}
		params[39] = ""  // an empty item
		params[35] = "é" // UTF-8
		rows = append(rows, recfile.Row{WALSeq: 2, Index: uint32(i), TS: at, TemplateID: 1, TemplateVersion: 1, Source: "src", Params: params})
		want = append(want, "event "+strings.Join(params, " "))
	}
	add := f.v3File("acme", "2026-01-01", "w2", rows, texts, recfile.WithHighCompression(true))
	f.commit(f.rec, 2, add)
	data, err := s.Get(f.ctx, f.rec.FileKey(add.Path))
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	// v8 is v7 and rows whose kinds value is empty (every parameter here
	// is an s item).
	if v, err := lake.RecordsFileVersion(pf); err != nil || v != 8 {
		t.Fatalf("the file is records v%d (%v), want 8", v, err)
	}
	if err := laketest.CheckWithArrow(f.ctx, s); err == nil {
		t.Error("arrow: a v7 file under the v6 schema passed")
	}
	snap, err := f.rec.Snapshot(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, ok := lake.RecordsSchemaUpdate(snap.Metadata)
	if !ok || md.SchemaString != lake.RecordsSchemaString() {
		t.Fatal("a v6 schema is not updated to the current one")
	}
	if _, again := lake.RecordsSchemaUpdate(md); again {
		t.Fatal("the current schema asks for another update")
	}
	if err := f.rec.Commit(f.ctx, snap.Version+1, []delta.Action{{MetaData: &md}}); err != nil {
		t.Fatal(err)
	}
	if err := laketest.CheckWithArrow(f.ctx, s); err != nil {
		t.Errorf("arrow: %v", err)
	}
	lines, err := laketest.Lines(f.ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	sorted := slices.Clone(want)
	slices.Sort(sorted)
	if d := laketest.Diff(lines, sorted); d != "" {
		t.Error(d)
	}
	var got []lake.Record
	if err := lake.Open(s).Query(f.ctx, lake.Filter{}, func(r lake.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		if r.Line != want[i] || len(r.Params) != 40 || r.Params[39] != "" || r.Params[35] != "é" {
			t.Errorf("record %d: line %q params %q, want %q", i, r.Line, r.Params, want[i])
		}
	}
}

func TestFormatsNotUTF8(t *testing.T) {
	r := lake.Record{WALSeq: 1, Tenant: "t", Source: "s", Line: "caf\xe9\tx"}
	var b bytes.Buffer
	if err := lake.WriteRaw(&b, r); err != nil || b.String() != "caf\xe9\tx\n" {
		t.Errorf("raw %q, %v", b.String(), err)
	}
	b.Reset()
	if err := lake.WriteJSONL(&b, r); err != nil {
		t.Fatal(err)
	}
	var j struct {
		Line       string `json:"line"`
		LineBase64 string `json:"line_base64"`
	}
	if err := json.Unmarshal(b.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(j.LineBase64)
	if err != nil || string(raw) != r.Line || j.Line != "caf\uFFFD\tx" {
		t.Errorf("jsonl %s: line_base64 decodes to %q (%v)", b.String(), raw, err)
	}
	b.Reset()
	r.Line = "valid ü"
	if err := lake.WriteJSONL(&b, r); err != nil || strings.Contains(b.String(), "line_base64") {
		t.Errorf("jsonl of a UTF-8 line has line_base64: %s", b.String())
	}
	b.Reset()
	r.Line = "caf\xe9\tx"
	if err := lake.WriteTable(&b, r); err != nil || !strings.HasSuffix(b.String(), "\tcaf\\xe9\\tx\n") {
		t.Errorf("table %q, %v", b.String(), err)
	}
}
