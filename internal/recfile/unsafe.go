package recfile

import (
	"unsafe"

	"github.com/parquet-go/parquet-go"
)

// unsafeBytes returns the bytes of s without copying. The writer only reads
// them.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// unsafeString returns b as a string without copying; b must not change
// afterwards (the encoder's arena only grows).
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// valueLayout is parquet.Value's layout (parquet-go v0.32): level sets a
// value's levels and column through it. parquet.Value.Level is not
// inlined, and a call per value was 5% of Encode's CPU (appendSlot,
// appendCell). init checks that the layout gives what Level gives and
// panics when it does not (a parquet-go upgrade that changed Value: update
// valueLayout), rather than write a wrong file.
type valueLayout struct {
	ptr             *byte
	u64             uint64
	kind            int8
	definitionLevel byte
	repetitionLevel byte
	columnIndex     uint16 // XOR, as parquet.Value keeps it
}

func init() {
	if !layoutLevels() {
		panic("recfile: parquet.Value's layout is not valueLayout's (parquet-go changed): update valueLayout")
	}
}

// layoutLevels reports whether level gives the values Level gives.
func layoutLevels() bool {
	if unsafe.Sizeof(valueLayout{}) != unsafe.Sizeof(parquet.Value{}) {
		return false
	}
	for _, v := range []parquet.Value{parquet.NullValue(), parquet.Int64Value(-5), parquet.Int32Value(7),
		parquet.ByteArrayValue([]byte("abc")), parquet.ByteArrayValue(nil), parquet.BooleanValue(true)} {
		for _, l := range [][3]int{{0, 0, 0}, {1, 2, 3}, {0, 3, 200}, {1, 1, 65534}, {255, 255, 1}} {
			a, b := level(v, l[0], l[1], l[2]), v.Level(l[0], l[1], l[2])
			if a != b || a.RepetitionLevel() != l[0] || a.DefinitionLevel() != l[1] || a.Column() != l[2] {
				return false
			}
		}
	}
	return true
}

// level is v.Level(rep, def, ci), inlined, for the levels and columns the
// encoder writes (levels below 256, the column below 65535; Level panics
// beyond, level does not check).
func level(v parquet.Value, rep, def, ci int) parquet.Value {
	l := (*valueLayout)(unsafe.Pointer(&v))
	l.repetitionLevel, l.definitionLevel, l.columnIndex = byte(rep), byte(def), ^uint16(ci)
	return v
}
