package recfile

import (
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestLevelLayout checks that level, which sets a parquet.Value's levels
// through valueLayout, gives what parquet.Value.Level gives (init panics
// otherwise; this says which value differs).
func TestLevelLayout(t *testing.T) {
	tests := []struct {
		name string
		v    parquet.Value
	}{
		{"null", parquet.NullValue()},
		{"int64", parquet.Int64Value(-1 << 40)},
		{"int32", parquet.Int32Value(-7)},
		{"bytes", parquet.ByteArrayValue([]byte("a parameter"))},
		{"empty bytes", parquet.ByteArrayValue([]byte{})},
		{"nil bytes", parquet.ByteArrayValue(nil)},
		{"double", parquet.DoubleValue(1.5)},
	}
	levels := [][3]int{{0, 0, 0}, {0, 1, 9}, {1, 3, 40}, {0, 0, 1000}, {255, 255, parquet.MaxColumnIndex}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, l := range levels {
				got, want := level(tt.v, l[0], l[1], l[2]), tt.v.Level(l[0], l[1], l[2])
				if got != want || !parquet.Equal(got, want) || got.RepetitionLevel() != l[0] ||
					got.DefinitionLevel() != l[1] || got.Column() != l[2] || got.IsNull() != tt.v.IsNull() {
					t.Errorf("level(%v, %v) = %#v, Level gives %#v", tt.v, l, got, want)
				}
			}
		})
	}
	if !layoutLevels() {
		t.Error("layoutLevels() = false")
	}
}
