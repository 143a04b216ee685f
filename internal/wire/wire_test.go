package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var errBad = errors.New("bad test payload")

func TestRoundTrip(t *testing.T) {
	var e Encoder
	e.U8('X')
	e.Uvarint(300)
	e.Varint(-5)
	e.Str("hello")
	e.Bytes([]byte{1, 2, 3})
	e.Uvarint(2)
	e.U8(7)
	e.U8(8)
	want := []byte{'X', 0xac, 0x02, 0x09, 5, 'h', 'e', 'l', 'l', 'o', 3, 1, 2, 3, 2, 7, 8}
	if !bytes.Equal(e.B, want) {
		t.Fatalf("encoded %x, want %x", e.B, want)
	}
	d := NewDecoder(e.B, errBad)
	if d.U8("u8") != 'X' || d.Uvarint("u") != 300 || d.Varint("v") != -5 || d.Str("s", 5) != "hello" ||
		!bytes.Equal(d.Bytes("b", 0), []byte{1, 2, 3}) || d.Count("n", 1) != 2 || d.U8("a") != 7 || d.U8("b") != 8 {
		t.Fatalf("round trip differs: %v", d.Err())
	}
	if d.Offset() != len(want) || d.Remaining() != 0 {
		t.Fatalf("offset %d remaining %d", d.Offset(), d.Remaining())
	}
	if err := d.End("test"); err != nil {
		t.Fatal(err)
	}
}

func TestDecoderErrors(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		read func(d *Decoder)
		want string
	}{
		{"truncated u8", nil, func(d *Decoder) { d.U8("kind") }, "truncated kind at byte 0"},
		{"bad uvarint", []byte{0x80}, func(d *Decoder) { d.Uvarint("seq") }, "bad varint seq"},
		{"bad varint", []byte{0xff, 0xff}, func(d *Decoder) { d.Varint("ts") }, "bad varint ts"},
		{"count beyond payload", []byte{10, 0, 0}, func(d *Decoder) { d.Count("items", 1) }, "items count 10 exceeds payload"},
		{"count of wide items", []byte{2, 0, 0, 0}, func(d *Decoder) { d.Count("items", 2) }, "items count 2 exceeds payload"},
		{"bad string length", []byte{0x80}, func(d *Decoder) { d.Bytes("text", 0) }, "bad varint text length at byte 0"},
		{"string beyond payload", []byte{4, 'a'}, func(d *Decoder) { d.Str("text", 0) }, "text length 4 exceeds payload"},
		{"string beyond max", []byte{3, 'a', 'b', 'c'}, func(d *Decoder) { d.Str("text", 2) }, "text length 3 exceeds payload"},
		{"magic", []byte{'A', 'B', 1}, func(d *Decoder) { d.Header('Q', 'F', 1, "frame") }, `frame magic "AB"`},
		{"version", []byte{'Q', 'F', 3}, func(d *Decoder) { d.VersionedHeader('Q', 'F', 1, 2, "frame") }, "unsupported frame version 3"},
		{"trailing", []byte{1, 2}, func(d *Decoder) { d.U8("x"); d.End("thing") }, "1 trailing bytes after thing"},
		{"first error sticks", []byte{0x80}, func(d *Decoder) { d.Uvarint("first"); d.U8("second") }, "bad varint first at byte 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(tt.b, errBad)
			tt.read(&d)
			err := d.Err()
			if !errors.Is(err, errBad) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q wrapping the sentinel", err, tt.want)
			}
			if d.U8("after") != 0 || d.Uvarint("after") != 0 || d.Str("after", 0) != "" || d.Count("after", 1) != 0 {
				t.Fatal("a read after an error returned a value")
			}
		})
	}
}

// Reading a field allocates nothing and copies no name: Bytes once built
// its length's name for every read.
func TestBytesDoesNotAllocate(t *testing.T) {
	var e Encoder
	for range 100 {
		e.Str("param")
	}
	// Not constants, which the compiler would join; long enough that the
	// name and " length" do not fit the compiler's 32-byte stack buffer.
	names := []string{"the parameter of a mined record", "the value of an attribute of a record"}
	if n := testing.AllocsPerRun(10, func() {
		d := NewDecoder(e.B, errBad)
		for i := range 100 {
			d.Bytes(names[i%2], 0)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per 100 reads", n)
	}
}
