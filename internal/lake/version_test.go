package lake_test

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/recfile"
)

// The lake reads records files of version 3 and up (v >= 3) as recfile
// reads them, so RecordsFileVersion must refuse a version recfile does not
// know: a newer quarry's file is an error, not misread rows.
func TestRecordsFileVersionBounds(t *testing.T) {
	type row struct {
		Kinds string `parquet:"kinds"`
	}
	for _, tc := range []struct {
		version string
		want    int // 0: refused
	}{
		{"2", 2},
		{"3", 3},
		{strconv.Itoa(recfile.Version), recfile.Version},
		{strconv.Itoa(recfile.Version + 1), 0},
		{"1", 0},
		{"x", 0},
	} {
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[row](&buf, parquet.KeyValueMetadata("quarry.records.version", tc.version))
		if _, err := w.Write([]row{{Kinds: "s"}}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := lake.RecordsFileVersion(f)
		switch {
		case tc.want == 0 && err == nil:
			t.Errorf("version %q: read as %d, want an error", tc.version, got)
		case tc.want != 0 && (err != nil || got != tc.want):
			t.Errorf("version %q: %d, %v; want %d", tc.version, got, err, tc.want)
		}
	}
}
