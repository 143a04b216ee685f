package recfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
)

// byteDeltaCases are value sequences with the edges of the encoding: no
// value, one, a whole block and one more, equal deltas (width 0), deltas
// that wrap, the extremes of each type.
func byteDeltaCases() map[string][]int64 {
	r := rand.New(rand.NewPCG(3, 4))
	random := func(n int, lo, hi int64) []int64 {
		v := make([]int64, n)
		for i := range v {
			v[i] = lo + r.Int64N(hi-lo)
		}
		return v
	}
	counter := make([]int64, 300)
	for i := range counter {
		counter[i] = int64(7 + 3*i)
	}
	sorted := random(1000, 0, 5000)
	slices.Sort(sorted)
	return map[string][]int64{
		"none":          {},
		"one":           {42},
		"two":           {-5, 5},
		"a block":       random(129, -100, 100),
		"a block and 1": random(130, -100, 100),
		"equal deltas":  counter,
		"sorted":        sorted,
		"lengths":       random(3628, 0, 80),
		"wide":          random(500, -1<<40, 1<<40),
		"int32 edges":   {math.MaxInt32, math.MinInt32, 0, math.MaxInt32, -1, math.MinInt32, 1},
		"int64 edges":   {math.MaxInt64, math.MinInt64, 0, math.MaxInt64, -1, math.MinInt64, 1},
	}
}

// TestByteDeltaRoundTrip: deltaInts and deltaLength write what parquet-go's
// own DELTA_BINARY_PACKED and DELTA_LENGTH_BYTE_ARRAY decoders read back
// exactly, every miniblock packed at a whole number of bytes.
func TestByteDeltaRoundTrip(t *testing.T) {
	for name, v := range byteDeltaCases() {
		t.Run(name, func(t *testing.T) {
			b, err := deltaEnc.EncodeInt64(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			checkByteWidths(t, b, len(v))
			got, err := parquet.DeltaBinaryPacked.DecodeInt64(nil, b)
			if err != nil {
				t.Fatalf("int64: %v", err)
			}
			if !slices.Equal(got, v) && len(v)+len(got) > 0 {
				t.Fatalf("int64: decoded %v, want %v", got, v)
			}

			v32 := make([]int32, len(v))
			for i, x := range v {
				v32[i] = int32(x) // wraps the wide cases: their deltas wrap too
			}
			b, err = deltaEnc.EncodeInt32(nil, v32)
			if err != nil {
				t.Fatal(err)
			}
			checkByteWidths(t, b, len(v))
			got32, err := parquet.DeltaBinaryPacked.DecodeInt32(nil, b)
			if err != nil {
				t.Fatalf("int32: %v", err)
			}
			if !slices.Equal(got32, v32) && len(v)+len(got32) > 0 {
				t.Fatalf("int32: decoded %v, want %v", got32, v32)
			}

			// The same sequence as byte array lengths, where it can be one.
			var src []byte
			offs := []uint32{0}
			for i, x := range v {
				n := int(uint64(x) % 70)
				for k := range n {
					src = append(src, byte('a'+(i+k)%26))
				}
				offs = append(offs, uint32(len(src)))
			}
			b, err = deltaLen.EncodeByteArray(nil, src, offs)
			if err != nil {
				t.Fatal(err)
			}
			vals, voffs, err := parquet.DeltaLengthByteArray.DecodeByteArray(nil, b, nil)
			if err != nil {
				t.Fatalf("byte array: %v", err)
			}
			if string(vals) != string(src) || len(voffs) != len(offs) {
				t.Fatalf("byte array: decoded %d bytes in %d values, want %d in %d", len(vals), len(voffs)-1, len(src), len(offs)-1)
			}
			for i := range offs {
				if voffs[i]-voffs[0] != offs[i] {
					t.Fatalf("byte array: value %d at %d, want %d", i, voffs[i]-voffs[0], offs[i])
				}
			}
		})
	}
}

// checkByteWidths walks an encoded DELTA_BINARY_PACKED page and fails
// unless every miniblock's bit width is a multiple of 8.
func checkByteWidths(t *testing.T, b []byte, n int) {
	t.Helper()
	read := func() uint64 {
		u, k := binary.Uvarint(b)
		if k <= 0 {
			t.Fatal("truncated header")
		}
		b = b[k:]
		return u
	}
	block, minis, total := read(), read(), read()
	read() // first value
	if block != deltaBlock || minis != deltaMiniCount || total != uint64(n) {
		t.Fatalf("header %d %d %d, want %d %d %d", block, minis, total, deltaBlock, deltaMiniCount, n)
	}
	for left := n - 1; left > 0; left -= deltaBlock {
		read() // min delta
		widths := b[:deltaMiniCount]
		b = b[deltaMiniCount:]
		for m, w := range widths {
			if w%8 != 0 {
				t.Fatalf("miniblock width %d bits, not whole bytes", w)
			}
			if m*deltaMiniBlock < min(left, deltaBlock) {
				b = b[int(w)*deltaMiniBlock/8:]
			}
		}
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes after the last block", len(b))
	}
}

// TestByteDeltaSmaller: what the byte-wide widths are for. Record indexes
// of rows sorted by template (each template's rows in WAL order, 40
// templates interleaved in frames of 500 lines), and string lengths,
// compress smaller at zstd's best level than parquet-go's
// DELTA_BINARY_PACKED, which packs each miniblock at the fewest bits.
func TestByteDeltaSmaller(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	byTpl := make([][]int32, 40)
	for i := range 4000 {
		k := min(int(r.ExpFloat64()*8), 39)
		byTpl[k] = append(byTpl[k], int32(i%500))
	}
	var index []int32
	for _, x := range byTpl {
		index = append(index, x...)
	}
	lengths := make([]int32, 4000)
	for i := range lengths {
		lengths[i] = int32(10 + r.IntN(30))
	}
	c := codec(zstd.SpeedBestCompression)
	for name, v := range map[string][]int32{"record indexes": index, "lengths": lengths} {
		std, _ := parquet.DeltaBinaryPacked.EncodeInt32(nil, v)
		wide, _ := deltaEnc.EncodeInt32(nil, v)
		zs, _ := c.Encode(nil, std)
		zw, _ := c.Encode(nil, wide)
		t.Logf("%s: parquet-go %d -> %d bytes, byte-wide %d -> %d", name, len(std), len(zs), len(wide), len(zw))
		if len(zw) >= len(zs) {
			t.Errorf("%s: byte-wide %d bytes compressed, not below parquet-go's %d", name, len(zw), len(zs))
		}
	}
}

// FuzzByteDelta: any int64 sequence round-trips through deltaInts and
// parquet-go's decoder.
func FuzzByteDelta(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(make([]byte, 8*200))
	f.Fuzz(func(t *testing.T, b []byte) {
		v := make([]int64, len(b)/8)
		for i := range v {
			v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
		enc, err := deltaEnc.EncodeInt64(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parquet.DeltaBinaryPacked.DecodeInt64(nil, enc)
		if err != nil {
			t.Fatal(err)
		}
		if len(v) > 0 && !slices.Equal(got, v) {
			t.Fatalf("decoded %v, want %v", got, v)
		}
	})
}

// TestMorePlainAtBestLevel: at zstd's best level the more column's items
// (or its more_text values, records v7) are PLAIN (each value after its 4-byte length, which zstd models beside
// the text); the default level keeps DELTA_LENGTH_BYTE_ARRAY. Over the
// Loghub files and this machine's logs the PLAIN column is smaller in
// every file written at the best level (docs/benchmarks.md, "Lake size:
// byte-wide delta miniblocks").
func TestMorePlainAtBestLevel(t *testing.T) {
	var text strings.Builder
	text.WriteString("event")
	for range 40 {
		text.WriteString(" <*>")
	}
	tpl := Templates{{1, 1}: text.String()}
	r := rand.New(rand.NewPCG(5, 6))
	var rows []Row
	for i := range 300 {
		params := make([]string, 40)
		for j := range params {
			params[j] = strings.Repeat("ab", 1+r.IntN(6)) // 33rd and later in more
		}
		rows = append(rows, Row{WALSeq: 1, Index: uint32(i), TS: ns("2026-11-29T00:00:00.010Z") + int64(i)*1e9,
			TemplateID: 1, TemplateVersion: 1, Source: "s", Params: params})
	}
	hi, err := Encode(rows, tpl, WithHighCompression(true))
	if err != nil {
		t.Fatal(err)
	}
	busy, err := Encode(rows, tpl)
	if err != nil {
		t.Fatal(err)
	}
	if es := columnEncodings(t, hi.Data, colMoreText); !slices.Contains(es, format.Plain) || slices.Contains(es, format.DeltaLengthByteArray) {
		t.Errorf("best level: more_text's encodings %v, want PLAIN", es)
	}
	// An item that holds moreSep: the list, PLAIN at the best level too.
	was := rows[7].Params[39]
	rows[7].Params[39] = "ab\x1eab"
	hiList, err := Encode(rows, tpl, WithHighCompression(true))
	if err != nil {
		t.Fatal(err)
	}
	if es := columnEncodings(t, hiList.Data, colMore); !slices.Contains(es, format.Plain) || slices.Contains(es, format.DeltaLengthByteArray) {
		t.Errorf("best level, an item with 0x1e: more's encodings %v, want PLAIN", es)
	}
	if es := columnEncodings(t, busy.Data, colMore); !slices.Contains(es, format.DeltaLengthByteArray) {
		t.Errorf("default level: more's encodings %v, want DELTA_LENGTH_BYTE_ARRAY", es)
	}
	readsBack(t, tpl, rows, hiList.Data)
	rows[7].Params[39] = was
	readsBack(t, tpl, rows, hi.Data, busy.Data)
}

// TestKindsPlainWhereSmaller: at zstd's best level the kinds column is
// PLAIN or a dictionary, whichever file is smaller: PLAIN for a hundred
// templates of 1 to 40 rows, each with a typing of its own (runs of one
// kinds string, whose dictionary indexes are bit-packed across the runs'
// ends at 7 bits, where zstd finds the runs in the text), a dictionary
// for one template whose rows alternate between two strings at random (an
// index of one bit). The default level always writes the dictionary.
func TestKindsPlainWhereSmaller(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	word := func() string { return []string{"alpha", "bravo", "charlie"}[r.IntN(3)] }
	cases := map[string]func() (Templates, []Row){
		"runs of a hundred strings": func() (Templates, []Row) {
			// Templates of 1 to 40 rows, each with a typing of its own
			// (which of its 7 parameters are numbers): runs of one
			// kinds string each, about a hundred of them.
			tpl := Templates{}
			var rows []Row
			for k := range 100 {
				tpl[Key{uint64(k + 1), 1}] = "event <*> <*> <*> <*> <*> <*> <*>"
				for range 1 + r.IntN(40) {
					params := make([]string, 7)
					for j := range params {
						if (k*37)>>j&1 == 1 {
							params[j] = fmt.Sprint(r.IntN(1000))
						} else {
							params[j] = word()
						}
					}
					rows = append(rows, Row{WALSeq: 1, Index: uint32(len(rows)), TS: ns("2026-11-29T00:00:00.010Z") + int64(len(rows))*1e9,
						TemplateID: uint64(k + 1), TemplateVersion: 1, Source: "s", Params: params})
				}
			}
			return tpl, rows
		},
		"two strings at random": func() (Templates, []Row) {
			tpl := Templates{{1, 1}: "event <*>"}
			var rows []Row
			for i := range 2400 {
				p := word()
				if r.IntN(2) == 0 {
					p = fmt.Sprint(r.IntN(1000))
				}
				rows = append(rows, Row{WALSeq: 1, Index: uint32(i), TS: ns("2026-11-29T00:00:00.010Z") + int64(i)*1e9,
					TemplateID: 1, TemplateVersion: 1, Source: "s", Params: []string{p}})
			}
			return tpl, rows
		},
	}
	for name, gen := range cases {
		t.Run(name, func(t *testing.T) {
			tpl, rows := gen()
			hi, err := Encode(rows, tpl, WithHighCompression(true))
			if err != nil {
				t.Fatal(err)
			}
			size := map[string]int{}
			for _, k := range []string{"plain", "dict"} {
				o := defaultOptions()
				WithHighCompression(true)(&o)
				o.kinds = k
				f, err := encode(rows, tpl, &o)
				if err != nil {
					t.Fatal(err)
				}
				size[k] = len(f.Data)
			}
			if size["plain"] == size["dict"] {
				t.Fatalf("both encodings %d bytes: the case decides nothing", size["plain"])
			}
			if want := min(size["plain"], size["dict"]); len(hi.Data) != want {
				t.Errorf("best level wrote %d bytes; PLAIN kinds %d, dictionary %d", len(hi.Data), size["plain"], size["dict"])
			}
			busy, err := Encode(rows, tpl)
			if err != nil {
				t.Fatal(err)
			}
			if es := columnEncodings(t, busy.Data, colKinds); !slices.Contains(es, format.RLEDictionary) {
				t.Errorf("default level: kinds encodings %v, want a dictionary", es)
			}
			readsBack(t, tpl, rows, hi.Data, busy.Data)
		})
	}
}

// columnEncodings returns the encodings of a file's column col.
func columnEncodings(t *testing.T, data []byte, col string) []format.Encoding {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Metadata().RowGroups[0].Columns {
		if c.MetaData.PathInSchema[0] == col {
			return c.MetaData.Encoding
		}
	}
	t.Fatalf("no column %s", col)
	return nil
}

// TestTemplateKeyEncodingTrial: at zstd's best level template_id and
// template_version are PLAIN where that compresses smaller than
// DELTA_BINARY_PACKED (chooseDelta). Rows kept in WAL order whose
// templates take turns (apt's term.log: select, prepare, unpack a package)
// repeat their ids' bytes, which zstd finds in PLAIN and not in the
// deltas; ids that rise by one a row (a template a line, as apt's
// history.log) are DELTA's zero miniblocks. Either reads back.
func TestTemplateKeyEncodingTrial(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	type key struct {
		id uint64
		v  uint32
	}
	turns := []key{{11, 2}, {4, 1}, {12, 3}, {6, 1}}
	for _, tc := range []struct {
		name string
		key  func(i int) key
		want format.Encoding
	}{
		{"templates take turns", func(i int) key { return turns[i%len(turns)] }, format.Plain},
		{"a template a line", func(i int) key { return key{uint64(100 + i), uint32(1 + i)} }, format.DeltaBinaryPacked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl := Templates{}
			var rows []Row
			for i := range 2400 {
				k := tc.key(i)
				tpl[Key{k.id, k.v}] = fmt.Sprintf("step %d of <*> (<*>) ...", k.id)
				rows = append(rows, Row{WALSeq: 1, Index: uint32(i), TS: ns("2026-11-29T00:00:00.010Z") + int64(i)*1e6,
					TemplateID: k.id, TemplateVersion: k.v, Source: "s",
					Params: []string{fmt.Sprintf("lib%x", r.Uint32()), fmt.Sprintf("%d.%d-%d", r.IntN(9), r.IntN(30), r.IntN(5))}})
			}
			o := defaultOptions()
			WithHighCompression(true)(&o)
			o.sortByTpl = false // WAL order, as the encoder keeps term.log's rows
			f, err := encode(rows, tpl, &o)
			if err != nil {
				t.Fatal(err)
			}
			for _, col := range []string{colTemplateID, colVersion} {
				if es := columnEncodings(t, f.Data, col); !slices.Contains(es, tc.want) {
					t.Errorf("%s's encodings %v, want %v", col, es, tc.want)
				}
			}
			readsBack(t, tpl, rows, f.Data)
		})
	}
}
