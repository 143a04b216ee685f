package lake_test

import (
	"bytes"
	"context"
	"errors"
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
	"github.com/quarrylake/quarry/internal/objstore/miniotest"
	"github.com/quarrylake/quarry/internal/pqtest"
)

// fixture builds a lake in a local store.
type fixture struct {
	t     testing.TB
	ctx   context.Context
	store objstore.Store
	rec   *delta.Table
	tpl   *delta.Table
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	s, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureOn(t, s)
}

func newFixtureOn(t testing.TB, s objstore.Store) *fixture {
	f := &fixture{t: t, ctx: context.Background(), store: s,
		rec: delta.OpenTable(s, lake.RecordsTable), tpl: delta.OpenTable(s, lake.TemplatesTable)}
	if err := f.rec.Create(f.ctx, delta.Metadata{Name: "records", SchemaString: lake.RecordsSchemaString(), PartitionColumns: lake.DatedLayout.PartitionColumns()}); err != nil {
		t.Fatal(err)
	}
	if err := f.tpl.Create(f.ctx, delta.Metadata{Name: "templates", SchemaString: lake.TemplatesSchemaString}); err != nil {
		t.Fatal(err)
	}
	return f
}

// recordsFile uploads rows (of one tenant and date) and returns the add.
func (f *fixture) recordsFile(tenant, date, writer string, rows []lake.RecordRow) delta.Add {
	f.t.Helper()
	data := pqtest.Write(f.t, rows)
	first, last := uint64(rows[0].WALSeq), uint64(rows[len(rows)-1].WALSeq)
	rel := lake.RecordsFilePath(tenant, date, lake.FileName(first, last, writer))
	if err := f.store.Put(f.ctx, f.rec.FileKey(rel), data); err != nil {
		f.t.Fatal(err)
	}
	minTpl, maxTpl := rows[0].TemplateID, rows[0].TemplateID
	for _, r := range rows {
		minTpl, maxTpl = min(minTpl, r.TemplateID), max(maxTpl, r.TemplateID)
	}
	return delta.Add{Path: rel, PartitionValues: map[string]string{"tenant": tenant, "date": date}, Size: int64(len(data)),
		ModificationTime: time.Now().UnixMilli(), DataChange: true,
		Stats: delta.StatsJSON(int64(len(rows)),
			map[string]any{"wal_seq": rows[0].WALSeq, "template_id": minTpl},
			map[string]any{"wal_seq": rows[len(rows)-1].WALSeq, "template_id": maxTpl}, nil)}
}

func (f *fixture) templatesFile(writer string, rows []lake.TemplateRow) delta.Add {
	f.t.Helper()
	data := pqtest.Write(f.t, rows)
	rel := lake.FileName(uint64(rows[0].WALSeq), uint64(rows[len(rows)-1].WALSeq), writer)
	if err := f.store.Put(f.ctx, f.tpl.FileKey(rel), data); err != nil {
		f.t.Fatal(err)
	}
	return delta.Add{Path: rel, PartitionValues: map[string]string{}, Size: int64(len(data)),
		ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: delta.StatsJSON(int64(len(rows)), nil, nil, nil)}
}

// commit commits adds to table t with txn(quarry, hw).
func (f *fixture) commit(t *delta.Table, hw int64, adds ...delta.Add) {
	f.t.Helper()
	var actions []delta.Action
	for i := range adds {
		actions = append(actions, delta.Action{Add: &adds[i]})
	}
	f.commitActions(t, hw, actions...)
}

// commitActions commits the actions, after a txn of high-water hw, as the
// table's next version.
func (f *fixture) commitActions(t *delta.Table, hw int64, actions ...delta.Action) {
	f.t.Helper()
	snap, err := t.Snapshot(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	actions = append([]delta.Action{{Txn: &delta.Txn{AppID: lake.AppID, Version: hw}}}, actions...)
	if err := t.Commit(f.ctx, snap.Version+1, actions); err != nil {
		f.t.Fatal(err)
	}
}

func ts(s string) int64 {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UnixMicro()
}

func rec(seq int64, idx int32, at string, id int64, ver int32, params ...string) lake.RecordRow {
	return lake.RecordRow{WALSeq: seq, RecordIndex: idx, TS: ts(at), TemplateID: id, TemplateVersion: ver,
		Params: params, Source: "src", Attrs: map[string]string{"host": "h1"}}
}

// build makes a lake with two tenants, two dates and interleaved WAL
// sequences across files, plus an uncommitted file.
func build(t *testing.T) *fixture { return buildOn(t, newFixture(t)) }

func buildOn(t *testing.T, f *fixture) *fixture {
	tpls := f.templatesFile("enc1", []lake.TemplateRow{
		{TemplateID: 1, Tenant: "acme", Version: 1, Template: "user <*> logged in", Kind: "created", WALSeq: 1},
		{TemplateID: 2, Tenant: "acme", Version: 1, Template: "disk <*> at <*>%", Kind: "created", WALSeq: 2},
		{TemplateID: 1, Tenant: "acme", Version: 2, Template: "user <*> logged <*>", Kind: "changed", Previous: "user <*> logged in", WALSeq: 5},
		{TemplateID: 3, Tenant: "globex", Version: 1, Template: "GET <*> <*>", Kind: "created", WALSeq: 3},
	})
	f.commit(f.tpl, 6, tpls)
	a1 := f.recordsFile("acme", "2026-01-01", "enc1", []lake.RecordRow{
		rec(1, 0, "2026-01-01T23:59:58Z", 1, 1, "alice"),
		rec(2, 0, "2026-01-01T23:59:59Z", 2, 1, "sda", "91"),
		rec(5, 1, "2026-01-01T23:59:59Z", 1, 2, "dave", "out"),
	})
	a2 := f.recordsFile("acme", "2026-01-02", "enc2", []lake.RecordRow{
		rec(2, 1, "2026-01-02T00:00:01Z", 1, 1, "bob"),
		rec(5, 0, "2026-01-02T00:00:02Z", 1, 2, "carol", "in"),
		rec(6, 0, "2026-01-02T10:00:00Z", 2, 1, "sdb", "5"),
	})
	g1 := f.recordsFile("globex", "2026-01-01", "enc1", []lake.RecordRow{
		rec(3, 0, "2026-01-01T12:00:00Z", 3, 1, "/a", "200"),
		rec(4, 0, "2026-01-01T12:00:01Z", 3, 1, "/b", "404"),
	})
	f.commit(f.rec, 6, a1, a2, g1)
	// Uploaded but never committed: invisible.
	f.recordsFile("acme", "2026-01-02", "enc3", []lake.RecordRow{rec(7, 0, "2026-01-02T11:00:00Z", 1, 1, "mallory")})
	return f
}

func query(t *testing.T, l *lake.Lake, flt lake.Filter) []string {
	t.Helper()
	var out []string
	err := l.Query(context.Background(), flt, func(r lake.Record) error {
		out = append(out, fmt.Sprintf("%d.%d %s %s", r.WALSeq, r.Index, r.Tenant, r.Line))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestQuery(t *testing.T) {
	f := build(t)
	l := lake.Open(f.store)
	day := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	for _, c := range []struct {
		name string
		flt  lake.Filter
		want []string
	}{
		{"all in wal order", lake.Filter{}, []string{
			"1.0 acme user alice logged in", "2.0 acme disk sda at 91%", "2.1 acme user bob logged in",
			"3.0 globex GET /a 200", "4.0 globex GET /b 404", "5.0 acme user carol logged in",
			"5.1 acme user dave logged out", "6.0 acme disk sdb at 5%"}},
		{"tenant", lake.Filter{Tenant: "globex"}, []string{"3.0 globex GET /a 200", "4.0 globex GET /b 404"}},
		{"template", lake.Filter{TemplateID: 2}, []string{"2.0 acme disk sda at 91%", "6.0 acme disk sdb at 5%"}},
		{"since", lake.Filter{Since: day("2026-01-02T00:00:02Z")}, []string{"5.0 acme user carol logged in", "6.0 acme disk sdb at 5%"}},
		{"until exclusive", lake.Filter{Tenant: "acme", Until: day("2026-01-01T23:59:59Z")}, []string{"1.0 acme user alice logged in"}},
		{"window across midnight", lake.Filter{Since: day("2026-01-01T23:59:59Z"), Until: day("2026-01-02T00:00:02Z")}, []string{
			"2.0 acme disk sda at 91%", "2.1 acme user bob logged in", "5.1 acme user dave logged out"}},
		{"nothing", lake.Filter{Tenant: "nobody"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := query(t, l, c.flt)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestQueryRecordFieldsAndFormats(t *testing.T) {
	f := build(t)
	var got []lake.Record
	if err := lake.Open(f.store).Query(f.ctx, lake.Filter{Tenant: "globex"}, func(r lake.Record) error {
		got = append(got, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := got[0]
	if r.WALSeq != 3 || r.Index != 0 || r.Tenant != "globex" || !r.TS.Equal(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)) ||
		r.TemplateID != 3 || r.TemplateVersion != 1 || r.Source != "src" || r.Attrs["host"] != "h1" ||
		strings.Join(r.Params, ",") != "/a,200" || r.Line != "GET /a 200" {
		t.Fatalf("record %+v", r)
	}
	var raw, jsonl, table bytes.Buffer
	for _, c := range []struct {
		format string
		buf    *bytes.Buffer
	}{{"raw", &raw}, {"jsonl", &jsonl}, {"table", &table}} {
		fm, err := lake.NewFormatter(c.buf, c.format)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			if err := fm.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := fm.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if raw.String() != "GET /a 200\nGET /b 404\n" {
		t.Fatalf("raw = %q", raw.String())
	}
	if !strings.HasPrefix(jsonl.String(), `{"wal_seq":3,"index":0,"tenant":"globex","ts":"2026-01-01T12:00:00Z","template_id":3,"template_version":1,"params":["/a","200"],"attrs":{"host":"h1"},"source":"src","line":"GET /a 200"}`+"\n") {
		t.Fatalf("jsonl = %s", jsonl.String())
	}
	if lines := strings.Split(strings.TrimSpace(table.String()), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "WAL_SEQ") || !strings.HasSuffix(lines[1], "GET /a 200") {
		t.Fatalf("table = %s", table.String())
	}
	if _, err := lake.NewFormatter(&raw, "xml"); err == nil {
		t.Fatal("unknown format accepted")
	}
}

func TestQueryStopsOnCallbackError(t *testing.T) {
	f := build(t)
	stop := errors.New("stop")
	n := 0
	err := lake.Open(f.store).Query(f.ctx, lake.Filter{}, func(lake.Record) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("err %v after %d records", err, n)
	}
}

func TestQueryMissingTemplate(t *testing.T) {
	f := build(t)
	a := f.recordsFile("acme", "2026-01-03", "enc1", []lake.RecordRow{rec(8, 0, "2026-01-03T00:00:00Z", 9, 1, "x")})
	f.commit(f.rec, 8, a)
	err := lake.Open(f.store).Query(f.ctx, lake.Filter{}, func(lake.Record) error { return nil })
	if !errors.Is(err, lake.ErrTemplateMissing) {
		t.Fatalf("query: %v, want ErrTemplateMissing", err)
	}
}

func TestQueryUnsortedFile(t *testing.T) {
	f := build(t)
	a := f.recordsFile("acme", "2026-01-03", "enc1", []lake.RecordRow{
		rec(9, 0, "2026-01-03T00:00:00Z", 1, 1, "x"), rec(8, 0, "2026-01-03T00:00:00Z", 1, 1, "y")})
	f.commit(f.rec, 9, a)
	err := lake.Open(f.store).Query(f.ctx, lake.Filter{}, func(lake.Record) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "not sorted") {
		t.Fatalf("query: %v, want a sort error", err)
	}
}

func TestTemplatesAndHighWater(t *testing.T) {
	f := build(t)
	l := lake.Open(f.store)
	infos, err := l.Templates(f.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, i := range infos {
		got = append(got, fmt.Sprintf("%s %d.%d %d %q", i.Tenant, i.TemplateID, i.Version, i.Records, i.Text))
	}
	want := []string{`acme 1.1 2 "user <*> logged in"`, `acme 1.2 2 "user <*> logged <*>"`, `acme 2.1 2 "disk <*> at <*>%"`, `globex 3.1 2 "GET <*> <*>"`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("templates:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	infos, err = l.Templates(f.ctx, "globex")
	if err != nil || len(infos) != 1 || infos[0].Records != 2 {
		t.Fatalf("globex templates: %+v, %v", infos, err)
	}
	var buf bytes.Buffer
	if err := lake.WriteTemplates(&buf, "table", infos); err != nil || !strings.Contains(buf.String(), "GET <*> <*>") {
		t.Fatalf("write templates: %q, %v", buf.String(), err)
	}
	hw, err := l.HighWater(f.ctx)
	if err != nil || hw != 6 {
		t.Fatalf("high-water %d, %v", hw, err)
	}
	empty, _ := objstore.NewLocal(t.TempDir())
	if hw, err := lake.HighWater(f.ctx, empty); err != nil || hw != 0 {
		t.Fatalf("high-water of an empty lake: %d, %v", hw, err)
	}
}

// TestExists: a lake with a records log exists; a folder without one is
// ErrNoTable, so readers can tell a wrong URL from an empty lake.
func TestExists(t *testing.T) {
	f := build(t)
	if err := lake.Open(f.store).Exists(f.ctx); err != nil {
		t.Fatalf("built lake: %v", err)
	}
	empty, _ := objstore.NewLocal(t.TempDir())
	if err := lake.Open(empty).Exists(f.ctx); !errors.Is(err, lake.ErrNoTable) {
		t.Fatalf("empty folder: %v, want ErrNoTable", err)
	}
}

func age(t *testing.T, store objstore.Store, key string, d time.Duration) {
	t.Helper()
	s := store.(*objstore.Local)
	old := time.Now().Add(-d)
	if err := os.Chtimes(filepath.Join(s.Root(), filepath.FromSlash(key)), old, old); err != nil {
		t.Fatal(err)
	}
}

func TestVacuum(t *testing.T) {
	f := build(t)
	l := lake.Open(f.store)
	// An old orphan, a young orphan, an old file that is committed then
	// removed (still referenced by the log), and old log entries.
	oldOrphan := f.recordsFile("acme", "2026-01-05", "enc9", []lake.RecordRow{rec(20, 0, "2026-01-05T00:00:00Z", 1, 1, "o")})
	youngOrphan := f.recordsFile("acme", "2026-01-05", "enc8", []lake.RecordRow{rec(21, 0, "2026-01-05T00:00:00Z", 1, 1, "y")})
	removed := f.recordsFile("acme", "2026-01-05", "enc7", []lake.RecordRow{rec(22, 0, "2026-01-05T00:00:00Z", 1, 1, "r")})
	f.commit(f.rec, 22, removed)
	snap, _ := f.rec.Snapshot(f.ctx)
	if err := f.rec.Commit(f.ctx, snap.Version+1, []delta.Action{{Remove: &delta.Remove{Path: removed.Path, DeletionTimestamp: time.Now().UnixMilli(), DataChange: true}}}); err != nil {
		t.Fatal(err)
	}
	tplOrphan := f.templatesFile("enc9", []lake.TemplateRow{{TemplateID: 7, Tenant: "acme", Version: 1, Template: "x", Kind: "created", WALSeq: 30}})
	all, _ := f.store.List(f.ctx, "")
	for _, in := range all {
		age(t, f.store, in.Key, 48*time.Hour)
	}
	young := "records/" + youngOrphan.Path
	age(t, f.store, young, time.Minute)

	dry, err := l.Vacuum(f.ctx, lake.VacuumOptions{Retention: time.Hour, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"records/tenant=acme/date=2026-01-02/" + lake.FileName(7, 7, "enc3"), "records/" + oldOrphan.Path, "templates/" + tplOrphan.Path}
	if strings.Join(dry, "\n") != strings.Join(want, "\n") {
		t.Fatalf("dry run:\n%s\nwant\n%s", strings.Join(dry, "\n"), strings.Join(want, "\n"))
	}
	if after, _ := f.store.List(f.ctx, ""); len(after) != len(all) {
		t.Fatalf("dry run deleted files: %d -> %d", len(all), len(after))
	}
	deleted, err := l.Vacuum(f.ctx, lake.VacuumOptions{Retention: time.Hour})
	if err != nil || strings.Join(deleted, "\n") != strings.Join(want, "\n") {
		t.Fatalf("vacuum: %v, %v", deleted, err)
	}
	after, _ := f.store.List(f.ctx, "")
	if len(after) != len(all)-len(want) {
		t.Fatalf("%d files left, want %d", len(after), len(all)-len(want))
	}
	for _, k := range []string{young, "records/" + removed.Path, f.rec.CommitKey(0), f.tpl.CommitKey(1)} {
		if _, err := f.store.Stat(f.ctx, k); err != nil {
			t.Errorf("vacuum removed %s: %v", k, err)
		}
	}
	for _, tbl := range []string{lake.RecordsTable, lake.TemplatesTable} {
		if err := delta.ValidateLog(f.ctx, f.store, tbl); err != nil {
			t.Errorf("log after vacuum: %v", err)
		}
	}
	if got := query(t, l, lake.Filter{}); len(got) != 8 {
		t.Fatalf("query after vacuum: %d records", len(got))
	}
	if _, err := l.Vacuum(f.ctx, lake.VacuumOptions{Retention: -time.Second, DryRun: true}); err == nil {
		t.Fatal("negative retention accepted")
	}
	if _, err := l.Vacuum(f.ctx, lake.VacuumOptions{Grace: -time.Second, DryRun: true}); err == nil {
		t.Fatal("negative grace accepted")
	}
	// The removed file goes once its remove is older than the grace (7 days
	// by default), and not a moment before.
	later := func(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }
	if gone, err := l.Vacuum(f.ctx, lake.VacuumOptions{Retention: 30 * 24 * time.Hour, Now: later(7*24*time.Hour - time.Minute)}); err != nil || len(gone) != 0 {
		t.Fatalf("vacuum within the grace: %v, %v", gone, err)
	}
	gone, err := l.Vacuum(f.ctx, lake.VacuumOptions{Retention: time.Hour, Grace: time.Hour, Now: later(2 * time.Hour)})
	if err != nil || strings.Join(gone, ",") != young+",records/"+removed.Path {
		t.Fatalf("vacuum after the grace: %v, %v (want the removed file and the now old orphan)", gone, err)
	}
	if got := query(t, l, lake.Filter{}); len(got) != 8 {
		t.Fatalf("query after vacuuming a removed file: %d records", len(got))
	}
}

func TestCheckWithArrow(t *testing.T) {
	f := build(t)
	if err := laketest.CheckWithArrow(f.ctx, f.store); err != nil {
		t.Fatalf("check: %v", err)
	}
	// A file whose stats lie about its row count is caught.
	bad := f.recordsFile("acme", "2026-01-04", "enc1", []lake.RecordRow{rec(10, 0, "2026-01-04T00:00:00Z", 1, 1, "x")})
	bad.Stats = delta.StatsJSON(2, nil, nil, nil)
	f.commit(f.rec, 10, bad)
	err := laketest.CheckWithArrow(f.ctx, f.store)
	if err == nil || !strings.Contains(err.Error(), "numRecords is 2") {
		t.Fatalf("check with a wrong count: %v", err)
	}
}

// TestOnMinIO runs the readers over a real S3 server: ranged reads of
// Parquet footers and pages through the S3 store.
func TestOnMinIO(t *testing.T) {
	endpoint, ak, sk := miniotest.Start(t)
	miniotest.MakeBucket(t, endpoint, ak, sk, "lake")
	s, err := objstore.Open(context.Background(), "s3://lake/prod", objstore.S3Options{Endpoint: endpoint, AccessKey: ak, SecretKey: sk})
	if err != nil {
		t.Fatal(err)
	}
	f := buildOn(t, newFixtureOn(t, s))
	l := lake.Open(f.store)
	if got := query(t, l, lake.Filter{Tenant: "acme"}); len(got) != 6 || got[0] != "1.0 acme user alice logged in" {
		t.Fatalf("query over s3: %v", got)
	}
	if err := laketest.CheckWithArrow(f.ctx, f.store); err != nil {
		t.Fatalf("arrow over s3: %v", err)
	}
	for _, tbl := range []string{lake.RecordsTable, lake.TemplatesTable} {
		if err := delta.ValidateLog(f.ctx, f.store, tbl); err != nil {
			t.Fatalf("validate over s3: %v", err)
		}
	}
	// Retention protects every file here (all are seconds old).
	if gone, err := l.Vacuum(f.ctx, lake.VacuumOptions{Retention: time.Hour}); err != nil || len(gone) != 0 {
		t.Fatalf("vacuum over s3: %v, %v", gone, err)
	}
	// With zero retention only the uncommitted file goes.
	gone, err := l.Vacuum(f.ctx, lake.VacuumOptions{})
	if err != nil || len(gone) != 1 || !strings.HasSuffix(gone[0], lake.FileName(7, 7, "enc3")) {
		t.Fatalf("vacuum over s3 with zero retention: %v, %v", gone, err)
	}
}

// TestMergedTemplates: a merge row retires a template into another. Its
// versions still render the records mined with them, Templates says what it
// was merged into (following chains to the survivor), and a query for the
// survivor selects the retired templates' records too.
func TestMergedTemplates(t *testing.T) {
	f := newFixture(t)
	tpls := f.templatesFile("enc1", []lake.TemplateRow{
		{TemplateID: 1, Tenant: "acme", Version: 1, Template: "service alpha started", Kind: "created", WALSeq: 1},
		{TemplateID: 2, Tenant: "acme", Version: 1, Template: "service beta started", Kind: "created", WALSeq: 1},
		{TemplateID: 3, Tenant: "acme", Version: 1, Template: "service gamma started", Kind: "created", WALSeq: 2},
		{TemplateID: 1, Tenant: "acme", Version: 2, Template: "service <*> started", Kind: "changed", Previous: "service alpha started", WALSeq: 3},
		{TemplateID: 3, Tenant: "acme", Version: 1, Template: "service <*> started", Kind: "merged", Previous: "service gamma started", MergedInto: 2, WALSeq: 3},
		{TemplateID: 2, Tenant: "acme", Version: 1, Template: "service <*> started", Kind: "merged", Previous: "service beta started", MergedInto: 1, WALSeq: 3},
		{TemplateID: 4, Tenant: "acme", Version: 1, Template: "other", Kind: "created", WALSeq: 4},
	})
	f.commit(f.tpl, 4, tpls)
	recs := f.recordsFile("acme", "2026-01-01", "enc1", []lake.RecordRow{
		rec(1, 0, "2026-01-01T00:00:01Z", 1, 1),
		rec(1, 1, "2026-01-01T00:00:02Z", 2, 1),
		rec(2, 0, "2026-01-01T00:00:03Z", 3, 1),
		rec(3, 0, "2026-01-01T00:00:04Z", 1, 2, "delta"),
		rec(4, 0, "2026-01-01T00:00:05Z", 4, 1),
	})
	f.commit(f.rec, 4, recs)
	l := lake.Open(f.store)
	got := query(t, l, lake.Filter{TemplateID: 1})
	want := []string{"1.0 acme service alpha started", "1.1 acme service beta started", "2.0 acme service gamma started", "3.0 acme service delta started"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("template 1 and its merged family:\n got %q\nwant %q", got, want)
	}
	if got := query(t, l, lake.Filter{TemplateID: 4}); len(got) != 1 {
		t.Fatalf("template 4: %q", got)
	}
	infos, err := l.Templates(f.ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	into := map[uint64]uint64{}
	for _, ti := range infos {
		if ti.Kind == "merged" {
			t.Fatalf("a merge row listed as a template version: %+v", ti)
		}
		into[ti.TemplateID] = ti.MergedInto
	}
	if into[1] != 0 || into[2] != 1 || into[3] != 1 || into[4] != 0 {
		t.Fatalf("merged into: %v (3 merged into 2 merged into 1)", into)
	}
}

// TestVacuumGraceFromTable: with no grace given, vacuum keeps a removed
// file for the table's delta.deletedFileRetentionDuration when its
// metadata sets one; a grace given wins.
func TestVacuumGraceFromTable(t *testing.T) {
	f := build(t)
	l := lake.Open(f.store)
	removed := f.recordsFile("acme", "2026-01-05", "enc7", []lake.RecordRow{rec(22, 0, "2026-01-05T00:00:00Z", 1, 1, "r")})
	f.commit(f.rec, 22, removed)
	snap, _ := f.rec.Snapshot(f.ctx)
	if err := f.rec.Commit(f.ctx, snap.Version+1, []delta.Action{{Remove: &delta.Remove{Path: removed.Path, DeletionTimestamp: time.Now().UnixMilli(), DataChange: true}}}); err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	opts := lake.VacuumOptions{Retention: 30 * 24 * time.Hour, DryRun: true, Now: later}
	if gone, err := l.Vacuum(f.ctx, opts); err != nil || len(gone) != 0 {
		t.Fatalf("2h after the remove, no table property (grace 7 days): %v, %v", gone, err)
	}
	snap, _ = f.rec.Snapshot(f.ctx)
	md := snap.Metadata
	md.Configuration = map[string]string{delta.PropDeletedFileRetention: "interval 1 hours"}
	if err := f.rec.Commit(f.ctx, snap.Version+1, []delta.Action{{MetaData: &md}}); err != nil {
		t.Fatal(err)
	}
	if gone, err := l.Vacuum(f.ctx, opts); err != nil || strings.Join(gone, ",") != "records/"+removed.Path {
		t.Fatalf("2h after the remove, table retention 1h: %v, %v; want the removed file", gone, err)
	}
	opts.Grace = 3 * time.Hour
	if gone, err := l.Vacuum(f.ctx, opts); err != nil || len(gone) != 0 {
		t.Fatalf("a given grace of 3h: %v, %v; want nothing", gone, err)
	}
}

// TestTemplatesReadCheaply: reading a templates file of four rows costs
// allocations in proportion to its rows and columns, not to a batch of
// 1,024 rows (parquet-go allocates a page header per row and column it is
// asked for past the end: about 9,000 here before readAll asked only for
// the rows left).
func TestTemplatesReadCheaply(t *testing.T) {
	f := build(t)
	l := lake.Open(f.store)
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := l.TemplateTexts(f.ctx, ""); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1500 {
		t.Fatalf("%.0f allocations to read 4 templates", allocs)
	}
	t.Logf("%.0f allocations", allocs)
}
