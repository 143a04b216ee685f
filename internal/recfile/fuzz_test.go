package recfile

import (
	"bytes"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzKinds checks the kinds-string decoder never panics and accepts only
// what the encoder could write.
func FuzzKinds(f *testing.F) {
	for _, s := range []string{"", "s", "tBcci", "f2axb", "tZ", "c", "f0", "t", "f", "q", "uB0", "uB~s", "uB", "uZ0", "uB\x7f", "rss", "rs", "rtBsuB0", "rr", "d1", "d0", "d:", "id9s", "rsd2", "vB01", "vB0", "vB00", "svB2d1", strings.Repeat("d9", 4), "wR0", "wR", "w", "wZ0", "tMwQ0", "wD2p-s", "wD2p\x01", "wD9p-", "yM22R=0Q\\0", "yB<1R00", "yB<1R<0", "yB02R10Q00", "yB01", "yB00", "yB0:", "syB01RA0i", "ryB01RA2p-s", "yB01RA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, kinds string) {
		slots, err := parseKinds(nil, kinds)
		if err != nil {
			return
		}
		var b []byte
		right, strs := false, false
		for _, s := range slots {
			if s.kind == kindString || s.kind == kindInner || s.kind == kindDigits || s.kind == kindInnerD || s.kind == kindInnerW {
				right = right || !strs && s.col != 0 // the first s or u is not p0: numbered from the right
				strs = true
			}
			b = append(b, s.kind)
			switch s.kind {
			case kindDecimal:
				b = append(b, '0'+s.digits)
			case kindDigits:
				b = append(b, '0'+byte(s.runs))
			case kindTime:
				b = append(b, 'A'+byte(s.layout))
			case kindShift:
				b = append(b, 'A'+byte(s.layout), '0'+byte(len(s.res)))
				b = append(b, s.res...)
			case kindInnerW:
				b = append(b, 'A'+byte(s.layout), '0'+byte(s.offset), '0'+byte(len(s.shifts)))
				for _, a := range s.shifts {
					b = append(b, 'A'+byte(a.layout), '0'+byte(a.offset), '0'+byte(len(a.residue)))
					b = append(b, a.residue...)
				}
			case kindInner:
				b = append(b, 'A'+byte(s.layout), '0'+byte(s.offset))
			case kindInnerD:
				b = append(b, 'A'+byte(s.layout), '0'+byte(s.offset), '0'+byte(s.runs))
			}
		}
		if right {
			b = append([]byte{kindRight}, b...)
		}
		if string(b) != kinds {
			t.Fatalf("parseKinds(%q) re-encodes as %q", kinds, b)
		}
	})
}

// FuzzClassify checks every typed value renders back to its exact text.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"0", "-1", "007", "1.50", "-0.05", "10.0.0.1", "7f3a", "9223372036854775807", "1e5", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		kind, digits, v := classify(p)
		switch kind {
		case kindString, kindBytes:
			return
		}
		if got := string(appendValue(nil, slot{kind: kind, digits: digits}, v)); got != p {
			t.Fatalf("classify(%q) = %c/%d %d renders %q", p, kind, digits, v, got)
		}
	})
}

// fuzzNeedles are FuzzDecode's needles: those that share no byte with its
// template texts are used.
var fuzzNeedles = []string{"\xff", "42", "1.5", "7", "N0-C", "2026-11", "Z", "06.03", "on"}

// FuzzDecode checks Decode returns an error, not a panic, on damaged files
// and renders each record of an intact one.
func FuzzDecode(f *testing.F) {
	tpl := Templates{{1, 1}: "<*> took <*> ms for <*>", {2, 1}: "<*> x <*>"}
	rows := []Row{
		{WALSeq: 1, Index: 0, TS: ns("2026-11-29T00:00:00.010Z"), TemplateID: 1, TemplateVersion: 1, Source: "s",
			Params: []string{"- 2026-11-29T00:00:00.010Z a", "42", "\xff"}},
		{WALSeq: 1, Index: 1, TS: ns("2026-11-29T00:00:01Z"), TemplateID: 2, TemplateVersion: 1, Source: "s",
			Params: []string{"2026-11-29T00:00:01Z", "1.5"}},
	}
	file, err := Encode(rows, tpl)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(file.Data)
	f.Add(file.Data[:len(file.Data)-1])
	// A file with the date column (records tables partitioned by tenant only).
	dated, err := Encode(rows, tpl, WithDate(true))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(dated.Data)
	// A file as compaction writes it (zstd frames of its best level).
	high, err := Encode(rows, tpl, WithDate(true), WithHighCompression(true))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(high.Data)
	// A file cut into row groups with its rare versions last (TailKey).
	var cut []Row
	for i := range 14 {
		r := rows[i%2]
		r.Index = uint32(i)
		if i == 5 {
			r.TemplateID = 3
		}
		cut = append(cut, r)
	}
	tpl[Key{3, 1}] = tpl[Key{2, 1}]
	o := defaultOptions()
	o.groupRows, o.rareRows = 4, 3
	tailed, err := encode(cut, tpl, &o)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tailed.Data)
	// A file whose parameters are split at their digit runs (kind d).
	o = defaultOptions()
	o.digits = "on"
	digitRows := append(slices.Clone(rows), Row{WALSeq: 2, TS: ns("2026-11-29T00:00:02Z"), TemplateID: 2, TemplateVersion: 1, Source: "s",
		Params: []string{"node-246 of 1024", "1.5"}}, Row{WALSeq: 2, Index: 1, TS: ns("2026-11-29T00:00:00.010Z"), TemplateID: 1, TemplateVersion: 1,
		Source: "s", Params: []string{"- 2026-11-29T00:00:00.010Z a7", "42", "\xff"}})
	split, err := encode(digitRows, tpl, &o)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(split.Data)
	// A file with other times of the line (kinds w and y, records v6).
	bgl := "- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11 2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS KERNEL INFO"
	timed, err := Encode([]Row{
		{WALSeq: 3, TS: ns("2005-06-03T22:42:50Z"), TemplateID: 2, TemplateVersion: 1, Source: "s", Params: []string{bgl, "2005.06.03"}},
		{WALSeq: 3, Index: 1, TS: ns("2005-06-03T22:42:50Z"), TemplateID: 2, TemplateVersion: 1, Source: "s", Params: []string{"1117838570", "2005-06-03-15.42.50.675872"}},
	}, tpl)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(timed.Data)
	// A file with more_text (records v7): 40 parameters a row, the 33rd
	// and later in more, at zstd's best level.
	tpl[Key{4, 1}] = "flags" + strings.Repeat(" <*>", 40)
	var flagRows []Row
	for i := range 3 {
		params := make([]string, 40)
		for j := range params {
			params[j] = []string{"on", "", "\xff", "42"}[(i+j)%4]
		}
		flagRows = append(flagRows, Row{WALSeq: 4, Index: uint32(i), TS: ns("2026-11-29T00:00:03Z"), TemplateID: 4, TemplateVersion: 1, Source: "s", Params: params})
	}
	o = defaultOptions()
	WithHighCompression(true)(&o)
	o.moreText = "on"
	joined, err := encode(flagRows, tpl, &o)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(joined.Data)
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := Decode(data, tpl)
		for _, r := range recs {
			_ = r.Line
		}
		if err == nil {
			// What Decode reads, the full projection reads alike.
			all, perr := DecodeProjected(data, tpl, Projection{Lines: true, Source: true, Attrs: true})
			if perr != nil || len(all) != len(recs) {
				t.Fatalf("DecodeProjected: %d records, %v; Decode: %d", len(all), perr, len(recs))
			}
			for i := range all {
				if !bytes.Equal(all[i].Line, recs[i].Line) {
					t.Fatalf("record %d: line %q, Decode %q", i, all[i].Line, recs[i].Line)
				}
			}
			// A needle with no byte of any template's text can only be
			// inside a parameter: the Needle projection drops only lines
			// without it, and keeps the others in order.
			for _, nd := range fuzzNeedles {
				if slices.ContainsFunc(slices.Collect(maps.Values(tpl)), func(text string) bool { return strings.ContainsAny(text, nd) }) {
					continue // it could overlap a piece
				}
				n := NewNeedle([]byte(nd))
				kept, nerr := DecodeProjected(data, tpl, Projection{Lines: true, Source: true, Attrs: true, Needle: func(Key) *Needle { return n }})
				if nerr != nil {
					t.Fatalf("needle %q: %v", nd, nerr)
				}
				j := 0
				for _, r := range all {
					if j < len(kept) && kept[j].WALSeq == r.WALSeq && kept[j].Index == r.Index && bytes.Equal(kept[j].Line, r.Line) {
						j++
					} else if bytes.Contains(r.Line, []byte(nd)) {
						t.Fatalf("needle %q: line %q dropped", nd, r.Line)
					}
				}
				if j != len(kept) {
					t.Fatalf("needle %q: %d records kept, %d of them in the decode's order", nd, len(kept), j)
				}
			}
		}
		for m := 0; m < 16; m++ {
			p := Projection{Keep: func(k Key) bool { return k.ID == 1 }, Lines: m&1 != 0, Source: m&2 != 0, Attrs: m&4 != 0}
			if m&1 == 0 {
				p.Keep = nil
			}
			if m&8 == 0 {
				_, _ = DecodeProjected(data, tpl, p)
				continue
			}
			// Through a Reader, reading column chunks: the same records.
			want, werr := DecodeProjected(data, tpl, p)
			r, err := OpenAt(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				continue
			}
			got, gerr := r.DecodeProjected(tpl, p)
			if (werr == nil) != (gerr == nil) || len(got) != len(want) {
				t.Fatalf("Reader: %d records, %v; DecodeProjected: %d, %v", len(got), gerr, len(want), werr)
			}
			for i := range got {
				if got[i].WALSeq != want[i].WALSeq || got[i].Index != want[i].Index || !bytes.Equal(got[i].Line, want[i].Line) {
					t.Fatalf("Reader record %d: %+v, DecodeProjected %+v", i, got[i], want[i])
				}
			}
		}
	})
}

// classifyRef is the classifier classify replaced: each numeric parser in
// turn, then the UTF-8 check.
func classifyRef(p string) (kind byte, digits uint8, v int64) {
	if len(p) == 0 || len(p) > 20 || !numStart[p[0]] {
		return textKind(p), 0, 0
	}
	if n, ok := canonicalIntRef(p); ok {
		return kindInt, 0, n
	}
	if n, d, ok := canonicalDecimal(p); ok {
		return kindDecimal, d, n
	}
	if n, ok := canonicalIPv4(p); ok {
		return kindIPv4, 0, n
	}
	if n, ok := canonicalHex(p); ok {
		return kindHex, 0, n
	}
	return textKind(p), 0, 0
}

// canonicalIntRef is canonicalInt through strconv.
func canonicalIntRef(p string) (int64, bool) {
	s := strings.TrimPrefix(p, "-")
	if len(s) == 0 || len(s) > 19 || (s[0] == '0' && (len(s) > 1 || len(p) > 1)) {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i]-'0' > 9 {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(p, 10, 64)
	return n, err == nil
}

// classifySeeds are texts at the edges of each kind.
var classifySeeds = []string{"0", "-0", "-", "--1", "1-2", "-1", "007", "+5", "1.50", "-0.05", "-0.0", "0.0", ".5", "5.",
	"1.2.3", "1..2", "10.0.0.1", "-10.0.0.1", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "7f3a", "-7f3a", "add", "0abc",
	"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "99999999999999999999",
	"ffffffffffffffff", "1ffffffffffffffff", "1e5", "\xff", "h\xc3\xa9", "1\xff", "a\x80", "héllo", "12345678901234567890.5", "1.1234567890"}

// FuzzClassifyRef holds classify equal to classifyRef.
func FuzzClassifyRef(f *testing.F) {
	for _, s := range classifySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		k, d, v := classify(p)
		rk, rd, rv := classifyRef(p)
		if k != rk || d != rd || v != rv {
			t.Fatalf("classify(%q) = %c %d %d, reference %c %d %d", p, k, d, v, rk, rd, rv)
		}
	})
}
