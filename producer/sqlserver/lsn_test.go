package sqlserver

import (
	"encoding/json"
	"errors"
	"sort"
	"testing"
)

func TestParseLSN(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"0x0000002A000001F00003", "0x0000002A000001F00003", false},
		{"0x0000002a000001f00003", "0x0000002A000001F00003", false},
		{"0X00000000000000000000", "0x00000000000000000000", false},
		{"0000002a:000001f0:0003", "0x0000002A000001F00003", false},
		{"2a:1f0:3", "0x0000002A000001F00003", false},
		{"  0x0000002A000001F00003 ", "0x0000002A000001F00003", false},
		{"0x0000002A000001F0003", "", true},   // 19 digits
		{"0x0000002A000001F000033", "", true}, // 21 digits
		{"0000002A000001F00003", "", true},    // no 0x
		{"0x0000002A000001F0000G", "", true},
		{"", "", true},
		{"1:2", "", true},
		{"123456789:0:0", "", true},
		{"::", "", true},
	}
	for _, tc := range tests {
		l, err := ParseLSN(tc.in)
		if tc.wantErr {
			if !errors.Is(err, ErrBadLSN) {
				t.Errorf("ParseLSN(%q) = %v, %v; want ErrBadLSN", tc.in, l, err)
			}
			continue
		}
		if err != nil || l.String() != tc.want {
			t.Errorf("ParseLSN(%q) = %v, %v; want %s", tc.in, l, err, tc.want)
		}
	}
}

func TestLSNBytesScanValue(t *testing.T) {
	b := []byte{0, 0, 0, 0x2A, 0, 0, 0x01, 0xF0, 0, 3}
	var l LSN
	if err := l.Scan(b); err != nil || l.String() != "0x0000002A000001F00003" {
		t.Fatalf("Scan = %v %v", l, err)
	}
	v, err := l.Value()
	if err != nil || string(v.([]byte)) != string(b) {
		t.Fatalf("Value = %v %v", v, err)
	}
	if err := l.Scan([]byte{1, 2}); !errors.Is(err, ErrBadLSN) {
		t.Fatalf("Scan short: %v", err)
	}
	if err := l.Scan(int64(3)); !errors.Is(err, ErrBadLSN) {
		t.Fatalf("Scan int: %v", err)
	}
	if err := l.Scan(nil); err != nil || !l.IsZero() {
		t.Fatalf("Scan nil: %v %v", l, err)
	}
}

func TestLSNOrderAndPrev(t *testing.T) {
	in := []string{"0x00000100000000000000", "0x0000002A000001F00003", "0x0000002A000001F00002", "0x0000002A000001F10000", "0x00000000000000000001"}
	var ls []LSN
	for _, s := range in {
		l, err := ParseLSN(s)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].Compare(ls[j]) < 0 })
	want := []string{"0x00000000000000000001", "0x0000002A000001F00002", "0x0000002A000001F00003", "0x0000002A000001F10000", "0x00000100000000000000"}
	for i := range want {
		if ls[i].String() != want[i] {
			t.Fatalf("order %d = %s want %s", i, ls[i], want[i])
		}
	}
	p := ls[3].Prev() // ...F10000 -> ...F0FFFF
	if p.String() != "0x0000002A000001F0FFFF" || p.Compare(ls[3]) >= 0 || p.Compare(ls[2]) <= 0 {
		t.Fatalf("Prev = %s", p)
	}
	if (LSN{}).Prev() != (LSN{}) {
		t.Fatal("Prev of zero")
	}
}

func TestLSNJSON(t *testing.T) {
	l, _ := ParseLSN("0x0000002A000001F00003")
	p := Position{LSN: l, CommandID: 7, SeqVal: l, Op: OpUpdateAfter}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"lsn":"0x0000002A000001F00003","command_id":7,"seqval":"0x0000002A000001F00003","op":4}` {
		t.Fatalf("json %s", b)
	}
	var q Position
	if err := json.Unmarshal(b, &q); err != nil || q != p {
		t.Fatalf("round trip %+v %v", q, err)
	}
}

func TestPositionCompare(t *testing.T) {
	a, _ := ParseLSN("0x0000002A000001F00003")
	b, _ := ParseLSN("0x0000002A000001F00004")
	s1, _ := ParseLSN("0x0000002A000001F00005")
	s2, _ := ParseLSN("0x0000002A000001F00006")
	ordered := []Position{
		{},
		{LSN: a, CommandID: 1, SeqVal: s2, Op: OpDelete},
		{LSN: a, CommandID: 2, SeqVal: s1, Op: OpUpdateBefore}, // command id before seqval
		{LSN: a, CommandID: 2, SeqVal: s1, Op: OpUpdateAfter},
		{LSN: a, CommandID: 2, SeqVal: s2, Op: OpInsert},
		Through(a),
		{LSN: b, CommandID: 1, SeqVal: s1, Op: OpInsert},
		Through(b),
	}
	for i := range ordered {
		for j := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := ordered[i].Compare(ordered[j]); got != want {
				t.Errorf("Compare(%s, %s) = %d want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
	if got := ordered[2].String(); got != "0x0000002A000001F00003:2:0x0000002A000001F00005:3" {
		t.Errorf("String = %s", got)
	}
	if got := Through(a).String(); got != "0x0000002A000001F00003:end" {
		t.Errorf("String = %s", got)
	}
}

func TestOperations(t *testing.T) {
	want := map[int64]string{1: "delete", 2: "insert", 3: "update_before", 4: "update_after"}
	for v, name := range want {
		op, err := ParseOperation(v)
		if err != nil || op.String() != name {
			t.Errorf("ParseOperation(%d) = %v %v", v, op, err)
		}
	}
	for _, v := range []int64{0, 5, -1} {
		if _, err := ParseOperation(v); err == nil {
			t.Errorf("ParseOperation(%d) accepted", v)
		}
	}
	if OpSnapshot.String() != "snapshot" {
		t.Error(OpSnapshot.String())
	}
}

func FuzzParseLSN(f *testing.F) {
	for _, s := range []string{"0x0000002A000001F00003", "2a:1f0:3", "", "0x", "::", "0xZZ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLSN(s)
		if err != nil {
			return
		}
		m, err := ParseLSN(l.String())
		if err != nil || m != l {
			t.Fatalf("round trip %q -> %s -> %v %v", s, l, m, err)
		}
	})
}
