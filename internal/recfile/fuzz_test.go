package recfile

import (
	"bytes"
	"testing"
)

// FuzzKinds checks the kinds-string decoder never panics and accepts only
// what the encoder could write.
func FuzzKinds(f *testing.F) {
	for _, s := range []string{"", "s", "tBcci", "f2axb", "tZ", "c", "f0", "t", "f", "q", "uB0", "uB~s", "uB", "uZ0", "uB\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, kinds string) {
		slots, err := parseKinds(nil, kinds)
		if err != nil {
			return
		}
		var b []byte
		for _, s := range slots {
			b = append(b, s.kind)
			switch s.kind {
			case kindDecimal:
				b = append(b, '0'+s.digits)
			case kindTime:
				b = append(b, 'A'+byte(s.layout))
			case kindInner:
				b = append(b, 'A'+byte(s.layout), '0'+byte(s.offset))
			}
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
		}
		for m := 0; m < 8; m++ {
			p := Projection{Keep: func(k Key) bool { return k.ID == 1 }, Lines: m&1 != 0, Source: m&2 != 0, Attrs: m&4 != 0}
			if m&1 == 0 {
				p.Keep = nil
			}
			_, _ = DecodeProjected(data, tpl, p)
		}
	})
}
