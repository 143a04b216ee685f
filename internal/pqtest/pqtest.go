// Package pqtest writes Parquet files for tests: rows of a Go struct as
// parquet-go's generic writer writes them, zstd-compressed, as a writer
// other than quarry's would. Only tests import it.
package pqtest

import (
	"bytes"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// Write returns rows as a Parquet file, failing t on an error.
func Write[T any](t testing.TB, rows []T, opts ...parquet.WriterOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, append([]parquet.WriterOption{parquet.Compression(&parquet.Zstd)}, opts...)...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
