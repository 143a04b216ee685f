package lake_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/pqtest"
)

// templateRowV1 is a templates-table row as written before the kinds
// column.
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

// TestTemplateKinds: the templates table records the mask kind of each
// wildcard, and files written before the kinds column still read (their
// templates have no kinds).
func TestTemplateKinds(t *testing.T) {
	f := newFixture(t)
	old := pqtest.Write(t, []templateRowV1{{TemplateID: 1, Tenant: "acme", Version: 1, Template: "old <*>", Kind: "created", WALSeq: 1}})
	if err := f.store.Put(f.ctx, f.tpl.FileKey("old.parquet"), old); err != nil {
		t.Fatal(err)
	}
	oldAdd := delta.Add{Path: "old.parquet", PartitionValues: map[string]string{}, Size: int64(len(old)), DataChange: true}
	newAdd := f.templatesFile("enc", []lake.TemplateRow{{TemplateID: 2, Tenant: "acme", Version: 1,
		Template: "from <*> port <*>", Kind: "created", WALSeq: 2, Kinds: []string{"ipv4", ""}}})
	f.commit(f.tpl, 2, oldAdd, newAdd)
	f.commit(f.rec, 2)
	infos, err := lake.Open(f.store).Templates(f.ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64][]string{}
	for _, i := range infos {
		got[i.TemplateID] = i.Kinds
	}
	if len(got) != 2 || got[1] != nil || !slices.Equal(got[2], []string{"ipv4", ""}) {
		t.Fatalf("kinds %v, want none for 1 and [ipv4 \"\"] for 2", got)
	}
}

// TestTemplatesSchemaUpdate: a templates table created before the kinds
// column, or before templates v3 (previous and merged_into not nullable),
// is updated to the current schema; a current one is left alone.
func TestTemplatesSchemaUpdate(t *testing.T) {
	for name, old := range map[string]string{"v1": lake.TemplatesSchemaV1String, "v2": lake.TemplatesSchemaV2String} {
		md, ok := lake.TemplatesSchemaUpdate(delta.Metadata{SchemaString: old})
		if !ok || md.SchemaString != lake.TemplatesSchemaString {
			t.Fatalf("%s schema not updated: %v", name, ok)
		}
	}
	for _, col := range []string{"previous", "merged_into"} {
		if !strings.Contains(lake.TemplatesSchemaString, `{"name":"`+col+`","type":`) ||
			strings.Contains(lake.TemplatesSchemaString, `"name":"`+col+`","type":"string","nullable":false`) ||
			strings.Contains(lake.TemplatesSchemaString, `"name":"`+col+`","type":"long","nullable":false`) {
			t.Errorf("%s not a nullable column of TemplatesSchemaString", col)
		}
	}
	if _, ok := lake.TemplatesSchemaUpdate(delta.Metadata{SchemaString: lake.TemplatesSchemaString}); ok {
		t.Fatal("a current schema was updated")
	}
}

// TestTemplatesPreviousDerived: a templates file of templates v2 stores no
// previous text (it is ""), and Templates derives a changed version's from
// the version before; a file of the previous layout (templates v1: the text
// in previous, plain integer columns, page statistics) reads as written.
func TestTemplatesPreviousDerived(t *testing.T) {
	f := newFixture(t)
	old := pqtest.Write(t, []templateRowV1{
		{TemplateID: 1, Tenant: "acme", Version: 1, Template: "user <*> in", Kind: "created", WALSeq: 1},
		{TemplateID: 1, Tenant: "acme", Version: 2, Template: "user <*> <*>", Kind: "changed", Previous: "user <*> in", WALSeq: 2},
	})
	if err := f.store.Put(f.ctx, f.tpl.FileKey("old.parquet"), old); err != nil {
		t.Fatal(err)
	}
	oldAdd := delta.Add{Path: "old.parquet", PartitionValues: map[string]string{}, Size: int64(len(old)), DataChange: true}
	newAdd := f.templatesFile("enc", []lake.TemplateRow{
		{TemplateID: 2, Tenant: "acme", Version: 1, Template: "disk <*> full", Kind: "created", WALSeq: 3},
		{TemplateID: 2, Tenant: "acme", Version: 2, Template: "disk <*> <*>", Kind: "changed", WALSeq: 4},
		{TemplateID: 2, Tenant: "acme", Version: 3, Template: "<*> <*> <*>", Kind: "changed", WALSeq: 5},
		{TemplateID: 1, Tenant: "acme", Version: 3, Template: "<*> <*> <*>", Kind: "changed", WALSeq: 5},
	})
	f.commit(f.tpl, 5, oldAdd, newAdd)
	f.commit(f.rec, 5)
	infos, err := lake.Open(f.store).Templates(f.ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	got := map[[2]uint64]string{}
	for _, i := range infos {
		got[[2]uint64{i.TemplateID, uint64(i.Version)}] = i.Previous
	}
	want := map[[2]uint64]string{
		{1, 1}: "", {1, 2}: "user <*> in", {1, 3}: "user <*> <*>",
		{2, 1}: "", {2, 2}: "disk <*> full", {2, 3}: "disk <*> <*>",
	}
	if len(got) != len(want) {
		t.Fatalf("previous texts %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("template %d version %d: previous %q, want %q", k[0], k[1], got[k], w)
		}
	}
}

// TestTemplatesV4WithoutKinds: a templates file has a kinds column only
// when some row of it has kinds (templates v4), and merged_into only when
// a row is a merge (v3); files of all four layouts read back their rows,
// a missing kinds as none.
func TestTemplatesV4WithoutKinds(t *testing.T) {
	f := newFixture(t)
	put := func(name string, data []byte) delta.Add {
		if err := f.store.Put(f.ctx, f.tpl.FileKey(name), data); err != nil {
			t.Fatal(err)
		}
		return delta.Add{Path: name, PartitionValues: map[string]string{}, Size: int64(len(data)), DataChange: true}
	}
	row := func(id int64, kind string, into int64, kinds []string) lake.TemplateRow {
		return lake.TemplateRow{TemplateID: id, Tenant: "acme", Version: 1, Template: "t<*>", Kind: kind, MergedInto: into, WALSeq: id, Kinds: kinds}
	}
	adds := []delta.Add{
		put("live.parquet", pqtest.Write(t, []lake.TemplateRowLive{row(1, "created", 0, []string{"ipv4"}).Live()})),
		put("merged.parquet", pqtest.Write(t, []lake.TemplateRowMerged{row(2, "created", 0, []string{""}).Merged(), row(3, "merged", 2, nil).Merged()})),
		put("livebare.parquet", pqtest.Write(t, []lake.TemplateRowLiveBare{{TemplateID: 4, Tenant: "acme", Version: 1, Template: "t<*>", Kind: "created", WALSeq: 4}})),
		put("mergedbare.parquet", pqtest.Write(t, []lake.TemplateRowMergedBare{
			{TemplateID: 5, Tenant: "acme", Version: 1, Template: "t<*>", Kind: "created", WALSeq: 5},
			{TemplateID: 6, Tenant: "acme", Version: 1, Template: "t<*>", Kind: "merged", MergedInto: 5, WALSeq: 6}})),
	}
	f.commit(f.tpl, 6, adds...)
	f.commit(f.rec, 6)
	infos, err := lake.Open(f.store).Templates(f.ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]string{}
	for _, i := range infos {
		got[i.TemplateID] = strings.Join(i.Kinds, ",") + fmt.Sprintf("/%v", i.Kinds == nil)
	}
	want := map[uint64]string{1: "ipv4/false", 2: "/false", 4: "/true", 5: "/true"}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("template %d: kinds %q, want %q (all: %v)", id, got[id], w, got)
		}
	}
}
