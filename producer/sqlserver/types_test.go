package sqlserver

import (
	"math"
	"reflect"
	"testing"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
)

// The driver values below are what go-mssqldb's Scan into an `any` yields
// for each SQL Server type (see makeGoLangScanType and the decode functions
// in go-mssqldb's types.go): int64 for the integer types, bool for bit,
// float64 for float and real, []byte holding decimal text for
// decimal/numeric/money/smallmoney, []byte in wire order for
// uniqueidentifier, time.Time in UTC (the connection's zone) for the
// zone-less types and in a fixed zone for datetimeoffset, string for the
// character types and xml.
func TestFormatValuePerType(t *testing.T) {
	guidWire := []byte{0xFF, 0x19, 0x96, 0x6F, 0x86, 0x8B, 0x11, 0xD0, 0xB4, 0x2D, 0x00, 0xC0, 0x4F, 0xC9, 0x64, 0xFF}
	guidRFC := []byte{0x6F, 0x96, 0x19, 0xFF, 0x8B, 0x86, 0xD0, 0x11, 0xB4, 0x2D, 0x00, 0xC0, 0x4F, 0xC9, 0x64, 0xFF}
	plus2 := time.FixedZone("", 2*3600)
	minus530 := time.FixedZone("", -(5*3600 + 30*60))
	tests := []struct {
		typ  string
		v    any
		o    FormatOptions
		want string
		null bool
	}{
		{"bit", true, FormatOptions{}, "1", false},
		{"bit", false, FormatOptions{}, "0", false},
		{"tinyint", int64(255), FormatOptions{}, "255", false},
		{"smallint", int64(-32768), FormatOptions{}, "-32768", false},
		{"int", int64(2147483647), FormatOptions{}, "2147483647", false},
		{"bigint", int64(math.MinInt64), FormatOptions{}, "-9223372036854775808", false},
		{"decimal", []byte("12345.6700"), FormatOptions{}, "12345.6700", false},
		{"numeric", []byte("-0.001"), FormatOptions{}, "-0.001", false},
		{"DECIMAL", []byte("99999999999999999999999999999999999999"), FormatOptions{}, "99999999999999999999999999999999999999", false},
		{"money", []byte("-922337203685477.5808"), FormatOptions{}, "-922337203685477.5808", false},
		{"smallmoney", []byte("214748.3647"), FormatOptions{}, "214748.3647", false},
		{"float", 0.1, FormatOptions{}, "0.1", false},
		{"float", 1e300, FormatOptions{}, "1e+300", false},
		{"float", -2.5, FormatOptions{}, "-2.5", false},
		{"real", float64(float32(0.1)), FormatOptions{}, "0.1", false},
		{"real", float64(float32(3.4e38)), FormatOptions{}, "3.4e+38", false},
		{"date", time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), FormatOptions{}, "2026-11-29", false},
		{"date", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), FormatOptions{}, "0001-01-01", false},
		{"time", time.Date(1, 1, 1, 13, 4, 5, 123456700, time.UTC), FormatOptions{}, "13:04:05.1234567", false},
		{"time", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), FormatOptions{}, "00:00:00", false},
		{"datetime", time.Date(2026, 11, 29, 13, 4, 5, 3000000, time.UTC), FormatOptions{}, "2026-11-29T13:04:05.003", false},
		{"datetime2", time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC), FormatOptions{}, "9999-12-31T23:59:59.9999999", false},
		{"smalldatetime", time.Date(2026, 11, 29, 13, 4, 0, 0, time.UTC), FormatOptions{}, "2026-11-29T13:04:00", false},
		{"datetimeoffset", time.Date(2026, 11, 29, 13, 4, 5, 500000000, plus2), FormatOptions{}, "2026-11-29T13:04:05.5+02:00", false},
		{"datetimeoffset", time.Date(2026, 11, 29, 13, 4, 5, 0, minus530), FormatOptions{}, "2026-11-29T13:04:05-05:30", false},
		{"datetimeoffset", time.Date(2026, 11, 29, 13, 4, 5, 0, time.FixedZone("", 0)), FormatOptions{}, "2026-11-29T13:04:05Z", false},
		{"char", "ab   ", FormatOptions{}, "ab   ", false},
		{"varchar", "héllo", FormatOptions{}, "héllo", false},
		{"nchar", "日本 ", FormatOptions{}, "日本 ", false},
		{"nvarchar", "", FormatOptions{}, "", false},
		{"text", "long text", FormatOptions{}, "long text", false},
		{"ntext", "long ntext", FormatOptions{}, "long ntext", false},
		{"xml", "<a b=\"1\"/>", FormatOptions{}, "<a b=\"1\"/>", false},
		{"binary", []byte{0x00, 0xAB, 0x10}, FormatOptions{}, "0x00AB10", false},
		{"varbinary", []byte{}, FormatOptions{}, "0x", false},
		{"image", []byte{0xFF}, FormatOptions{}, "0xFF", false},
		{"timestamp", []byte{0, 0, 0, 0, 0, 0, 7, 0xD1}, FormatOptions{}, "0x00000000000007D1", false},
		{"hierarchyid", []byte{0x58}, FormatOptions{}, "0x58", false},
		{"uniqueidentifier", guidWire, FormatOptions{}, "6F9619FF-8B86-D011-B42D-00C04FC964FF", false},
		{"uniqueidentifier", guidRFC, FormatOptions{GUIDConversion: true}, "6F9619FF-8B86-D011-B42D-00C04FC964FF", false},
		{"uniqueidentifier", []byte{1, 2}, FormatOptions{}, "0x0102", false}, // malformed: kept as hex
		{"int", nil, FormatOptions{}, "", true},
		{"nvarchar", nil, FormatOptions{}, "", true},
		{"unknown_alias", int32(5), FormatOptions{}, "5", false},
		{"", mssql.UniqueIdentifier{0x6F, 0x96, 0x19, 0xFF, 0x8B, 0x86, 0xD0, 0x11, 0xB4, 0x2D, 0x00, 0xC0, 0x4F, 0xC9, 0x64, 0xFF}, FormatOptions{}, "6F9619FF-8B86-D011-B42D-00C04FC964FF", false},
	}
	for _, tc := range tests {
		got := FormatValue(tc.typ, tc.v, tc.o)
		if got.Str != tc.want || got.Null != tc.null {
			t.Errorf("FormatValue(%s, %#v) = %+v, want %q null=%v", tc.typ, tc.v, got, tc.want, tc.null)
		}
	}
}

// sql_variant: go-mssqldb yields the base type's value; the base type comes
// from SQL_VARIANT_PROPERTY(col, 'BaseType').
func TestFormatVariant(t *testing.T) {
	guidWire := []byte{0xFF, 0x19, 0x96, 0x6F, 0x86, 0x8B, 0x11, 0xD0, 0xB4, 0x2D, 0x00, 0xC0, 0x4F, 0xC9, 0x64, 0xFF}
	tests := []struct {
		base string
		v    any
		want string
	}{
		{"int", int64(42), "42"},
		{"decimal", []byte("1.50"), "1.50"},
		{"money", []byte("3.0000"), "3.0000"},
		{"varbinary", []byte{1, 2}, "0x0102"},
		{"uniqueidentifier", guidWire, "6F9619FF-8B86-D011-B42D-00C04FC964FF"},
		{"nvarchar", "x", "x"},
		{"datetime", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "2026-01-02T03:04:05"},
		{"date", time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), "2026-01-02"},
		{"real", float64(float32(1.1)), "1.1"},
		{"", []byte{1}, "0x01"},
	}
	for _, tc := range tests {
		if got := FormatVariant(tc.base, tc.v, FormatOptions{}); got.Str != tc.want {
			t.Errorf("FormatVariant(%s, %#v) = %q want %q", tc.base, tc.v, got.Str, tc.want)
		}
	}
	if !FormatVariant("", nil, FormatOptions{}).Null {
		t.Error("nil variant not NULL")
	}
}

func TestGUIDBytesByteOrder(t *testing.T) {
	s := "6F9619FF-8B86-D011-B42D-00C04FC964FF"
	wire, err := GUIDBytes(s, false)
	if err != nil {
		t.Fatal(err)
	}
	if hexBytes(wire) != "0xFF19966F868B11D0B42D00C04FC964FF" {
		t.Fatalf("wire order %s", hexBytes(wire))
	}
	rfc, _ := GUIDBytes(s, true)
	if hexBytes(rfc) != "0x6F9619FF8B86D011B42D00C04FC964FF" {
		t.Fatalf("rfc order %s", hexBytes(rfc))
	}
	for _, conv := range []bool{false, true} {
		b, _ := GUIDBytes(s, conv)
		if got := FormatValue("uniqueidentifier", b, FormatOptions{GUIDConversion: conv}).Str; got != s {
			t.Errorf("conv=%v: %s", conv, got)
		}
	}
	if _, err := GUIDBytes("nope", false); err == nil {
		t.Error("bad guid accepted")
	}
}

func TestKeysRoundTrip(t *testing.T) {
	var u mssql.UniqueIdentifier
	_ = u.Scan("6F9619FF-8B86-D011-B42D-00C04FC964FF")
	key := []any{int64(-5), "abc", []byte{0, 1}, time.Date(2026, 11, 29, 1, 2, 3, 4, time.UTC), 1.5, true, nil, u}
	parts, err := EncodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeKey(parts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range key {
		switch x := key[i].(type) {
		case []byte:
			if string(back[i].([]byte)) != string(x) {
				t.Errorf("part %d: %#v", i, back[i])
			}
		case time.Time:
			if !back[i].(time.Time).Equal(x) {
				t.Errorf("part %d: %#v", i, back[i])
			}
		default:
			if back[i] != key[i] {
				t.Errorf("part %d: %#v want %#v", i, back[i], key[i])
			}
		}
	}
	if _, err := EncodeKey([]any{struct{}{}}); err == nil {
		t.Error("unsupported type accepted")
	}
	if _, err := DecodeKey([]KeyPart{{T: "int", V: "x"}}); err == nil {
		t.Error("bad int accepted")
	}
	if _, err := DecodeKey([]KeyPart{{T: "what"}}); err == nil {
		t.Error("bad type accepted")
	}
}

func TestKeyParam(t *testing.T) {
	if v := KeyParam("decimal", []byte("1.50"), FormatOptions{}); v != "1.50" {
		t.Errorf("decimal: %#v", v)
	}
	wire, _ := GUIDBytes("6F9619FF-8B86-D011-B42D-00C04FC964FF", false)
	v := KeyParam("uniqueidentifier", wire, FormatOptions{})
	if u, ok := v.(mssql.UniqueIdentifier); !ok || u.String() != "6F9619FF-8B86-D011-B42D-00C04FC964FF" {
		t.Errorf("guid: %#v", v)
	}
	if v := KeyParam("int", int64(3), FormatOptions{}); v != int64(3) {
		t.Errorf("int: %#v", v)
	}
	b := []byte{1}
	v = KeyParam("varbinary", b, FormatOptions{})
	b[0] = 9
	if v.([]byte)[0] != 1 {
		t.Error("bytes not copied")
	}
}

// A saved key part that decodes encodes back to parts that decode to the
// same values: a restarted snapshot resumes after exactly the saved key,
// also when the parts were written by hand or by an older quarry.
func FuzzKeyRoundTrip(f *testing.F) {
	for _, p := range [][2]string{{"int", "-42"}, {"float", "1.5e300"}, {"bool", "true"}, {"str", "a\x00b"}, {"bytes", "00ff"},
		{"time", "2026-12-07T06:05:20.123456789+01:00"}, {"guid", "6F9619FF-8B86-D011-B42D-00C04FC964FF"}, {"null", ""}} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, typ, v string) {
		vals, err := DecodeKey([]KeyPart{{T: typ, V: v}})
		if err != nil {
			return
		}
		parts, err := EncodeKey(vals)
		if err != nil {
			t.Fatalf("%s %q decodes to %#v, which does not encode: %v", typ, v, vals, err)
		}
		back, err := DecodeKey(parts)
		if err != nil {
			t.Fatalf("%s %q: %+v does not decode: %v", typ, v, parts, err)
		}
		if x, ok := vals[0].(float64); ok && math.IsNaN(x) {
			if y, ok := back[0].(float64); !ok || !math.IsNaN(y) {
				t.Fatalf("%s %q: NaN came back as %#v", typ, v, back[0])
			}
			return
		}
		if tm, ok := vals[0].(time.Time); ok {
			if bt, ok := back[0].(time.Time); !ok || !bt.Equal(tm) || bt.Format(time.RFC3339Nano) != tm.Format(time.RFC3339Nano) {
				t.Fatalf("%s %q: %v came back as %#v", typ, v, tm, back[0])
			}
			return
		}
		if !reflect.DeepEqual(back, vals) {
			t.Fatalf("%s %q: %#v came back as %#v (%+v)", typ, v, vals, back, parts)
		}
	})
}
