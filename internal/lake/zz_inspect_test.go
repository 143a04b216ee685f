package lake

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/query"
	"github.com/quarrylake/quarry/internal/recfile"
)

func TestZZInspect(t *testing.T) {
	dir := os.Getenv("QUARRY_BENCH_LAKE")
	if dir == "" {
		t.Skip()
	}
	ctx := context.Background()
	store, _ := objstore.Open(ctx, dir, objstore.S3Options{})
	l := Open(store)
	q := query.MustCompile(`"IllegalStateException"`)
	s, err := l.prepare(ctx, q, SearchOptions{LineOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.files {
		m, err := s.openMeta(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		tp, skip, _ := s.filePlan(f, m.summary)
		fmt.Println(f.add.Path, m.size, "skip", skip, "rowgroups", len(m.pf.RowGroups()), "cols", len(m.pf.Schema().Columns()))
		var off int64
		for _, t := range m.summary {
			d := tp.plan.Template(t.Key.ID, t.Key.Version).Decision
			if d != query.None {
				fmt.Printf("  tpl %v rows %d at %d decision %v any %v\n", t.Key, t.Rows, off, d, t.AnyBytes)
			}
			off += t.Rows
		}
		for i, rg := range m.pf.RowGroups() {
			var sz int64
			for _, c := range rg.ColumnChunks() {
				fc := c.(*parquet.FileColumnChunk)
				_ = fc
			}
			lo, hi, _ := rg.ColumnChunks()[3].(*parquet.FileColumnChunk).Bounds()
			fmt.Printf("  rg %d rows %d tid %v..%v %d\n", i, rg.NumRows(), lo, hi, sz)
		}
		_ = recfile.Key{}
		m.close()
	}
}
