package sqlserver

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
)

// Value is one column value as a string, the form attributes and mined text
// take. Null distinguishes SQL NULL from the empty string.
type Value struct {
	Str  string
	Null bool
}

// FormatOptions control FormatValue.
type FormatOptions struct {
	// GUIDConversion must match the connection string's "guid conversion"
	// setting: when true go-mssqldb already returns uniqueidentifier bytes
	// in RFC 4122 order; when false (the default) in SQL Server's wire order
	// (first three groups little-endian), which mssql.UniqueIdentifier
	// reverses.
	GUIDConversion bool
}

// FormatValue turns a driver value, as go-mssqldb's Scan into an `any`
// yields it for a column of SQL Server type typeName (as in
// cdc.captured_columns.column_type or ColumnTypeDatabaseTypeName, any
// case), into its attribute string. The forms follow SQL Server's own text
// conversions where one exists:
//
//	bit                                  "1" / "0"
//	tinyint smallint int bigint          decimal integer
//	decimal numeric money smallmoney     the exact decimal text the driver returns ("12.3400")
//	float                                shortest round-trip text of the float64 ("0.1", "1e+300")
//	real                                 shortest round-trip text of the float32 ("0.1")
//	date                                 "2006-01-02"
//	time                                 "15:04:05[.fraction]" (fraction without trailing zeros)
//	datetime datetime2 smalldatetime     "2006-01-02T15:04:05[.fraction]" (no zone: the type has none)
//	datetimeoffset                       RFC 3339 with the stored offset ("2006-01-02T15:04:05.5+02:00")
//	char varchar nchar nvarchar text ntext xml   the string as is (char padding kept)
//	binary varbinary image rowversion/timestamp, CLR types (hierarchyid, geometry, geography)
//	                                     "0x" and upper-case hex, as SQL Server prints binary
//	uniqueidentifier                     "6F9619FF-8B86-D011-B42D-00C04FC964FF" (SQL Server's form)
//	sql_variant                          formatted by its base type, see FormatVariant
//
// A nil value is SQL NULL. A value whose Go type does not fit typeName is
// formatted by its Go type, so nothing is lost.
func FormatValue(typeName string, v any, o FormatOptions) Value {
	if v == nil {
		return Value{Null: true}
	}
	t := strings.ToUpper(strings.TrimSpace(typeName))
	switch x := v.(type) {
	case bool:
		if x {
			return Value{Str: "1"}
		}
		return Value{Str: "0"}
	case int64:
		return Value{Str: strconv.FormatInt(x, 10)}
	case float64:
		if t == "REAL" {
			return Value{Str: strconv.FormatFloat(float64(float32(x)), 'g', -1, 32)}
		}
		return Value{Str: strconv.FormatFloat(x, 'g', -1, 64)}
	case string:
		return Value{Str: x}
	case []byte:
		switch t {
		case "DECIMAL", "NUMERIC", "MONEY", "SMALLMONEY":
			return Value{Str: string(x)}
		case "UNIQUEIDENTIFIER":
			if s, ok := formatGUID(x, o.GUIDConversion); ok {
				return Value{Str: s}
			}
		}
		return Value{Str: hexBytes(x)}
	case time.Time:
		return Value{Str: formatTime(t, x)}
	case mssql.UniqueIdentifier:
		return Value{Str: x.String()}
	case int32:
		return Value{Str: strconv.FormatInt(int64(x), 10)}
	case int:
		return Value{Str: strconv.Itoa(x)}
	case float32:
		return Value{Str: strconv.FormatFloat(float64(x), 'g', -1, 32)}
	case fmt.Stringer:
		return Value{Str: x.String()}
	default:
		return Value{Str: fmt.Sprint(v)}
	}
}

// FormatVariant formats a sql_variant value. go-mssqldb yields the value of
// its base type but not the type, and several base types share a Go type
// ([]byte for decimal, money, binary and uniqueidentifier); the query
// therefore also selects SQL_VARIANT_PROPERTY(column, 'BaseType'), which is
// baseType here (empty when unknown: then []byte is printed as hex).
func FormatVariant(baseType string, v any, o FormatOptions) Value {
	return FormatValue(baseType, v, o)
}

func hexBytes(b []byte) string {
	const digits = "0123456789ABCDEF"
	out := make([]byte, 2+2*len(b))
	out[0], out[1] = '0', 'x'
	for i, c := range b {
		out[2+2*i] = digits[c>>4]
		out[3+2*i] = digits[c&15]
	}
	return string(out)
}

// formatGUID prints 16 uniqueidentifier bytes as SQL Server does. Without
// guid conversion the driver returns wire order and mssql.UniqueIdentifier
// puts it right; with it the bytes are already in display order.
func formatGUID(b []byte, converted bool) (string, bool) {
	if len(b) != 16 {
		return "", false
	}
	var u mssql.UniqueIdentifier
	if converted {
		copy(u[:], b)
	} else if err := u.Scan(b); err != nil {
		return "", false
	}
	return u.String(), true
}

func formatTime(t string, x time.Time) string {
	switch t {
	case "DATE":
		return x.Format("2006-01-02")
	case "TIME":
		return x.Format("15:04:05.999999999")
	case "DATETIMEOFFSET":
		return x.Format("2006-01-02T15:04:05.999999999Z07:00")
	case "DATETIME", "DATETIME2", "SMALLDATETIME":
		return x.Format("2006-01-02T15:04:05.999999999")
	}
	// Unknown: keep the zone when it is not UTC.
	if x.Location() == time.UTC {
		return x.Format("2006-01-02T15:04:05.999999999")
	}
	return x.Format(time.RFC3339Nano)
}

// GUIDBytes returns the driver's bytes of the uniqueidentifier s as go-mssqldb
// yields them with the given guid conversion setting (for tests and the
// in-memory source).
func GUIDBytes(s string, converted bool) ([]byte, error) {
	var u mssql.UniqueIdentifier
	if err := u.Scan(s); err != nil {
		return nil, fmt.Errorf("uniqueidentifier %q: %w", s, err)
	}
	if converted {
		return u[:], nil
	}
	v, _ := u.Value()
	return v.([]byte), nil
}
