package sqlserver

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
)

// KeyPart is a typed, JSON-safe form of one key value of a snapshot chunk
// boundary, so a restarted snapshot resumes after exactly the saved key.
type KeyPart struct {
	T string `json:"t"` // "null", "int", "float", "bool", "str", "bytes", "time", "guid"
	V string `json:"v,omitempty"`
}

// EncodeKey converts key values (as Row.Key holds them) to KeyParts.
func EncodeKey(key []any) ([]KeyPart, error) {
	out := make([]KeyPart, len(key))
	for i, v := range key {
		switch x := v.(type) {
		case nil:
			out[i] = KeyPart{T: "null"}
		case int64:
			out[i] = KeyPart{T: "int", V: strconv.FormatInt(x, 10)}
		case float64:
			out[i] = KeyPart{T: "float", V: strconv.FormatFloat(x, 'g', -1, 64)}
		case bool:
			out[i] = KeyPart{T: "bool", V: strconv.FormatBool(x)}
		case string:
			out[i] = KeyPart{T: "str", V: x}
		case []byte:
			out[i] = KeyPart{T: "bytes", V: hex.EncodeToString(x)}
		case time.Time:
			out[i] = KeyPart{T: "time", V: x.Format(time.RFC3339Nano)}
		case mssql.UniqueIdentifier:
			out[i] = KeyPart{T: "guid", V: x.String()}
		default:
			return nil, fmt.Errorf("key value %d: unsupported type %T", i, v)
		}
	}
	return out, nil
}

// DecodeKey reverses EncodeKey.
func DecodeKey(parts []KeyPart) ([]any, error) {
	out := make([]any, len(parts))
	for i, p := range parts {
		var err error
		switch p.T {
		case "null":
			out[i] = nil
		case "int":
			out[i], err = strconv.ParseInt(p.V, 10, 64)
		case "float":
			out[i], err = strconv.ParseFloat(p.V, 64)
		case "bool":
			out[i], err = strconv.ParseBool(p.V)
		case "str":
			out[i] = p.V
		case "bytes":
			out[i], err = hex.DecodeString(p.V)
		case "time":
			out[i], err = time.Parse(time.RFC3339Nano, p.V)
		case "guid":
			var u mssql.UniqueIdentifier
			err = u.Scan(p.V)
			out[i] = u
		default:
			err = fmt.Errorf("unknown type %q", p.T)
		}
		if err != nil {
			return nil, fmt.Errorf("key part %d (%s %q): %w", i, p.T, p.V, err)
		}
	}
	return out, nil
}

// KeyParam converts a key column's driver value into a query parameter that
// compares like the column: decimal and money text as a string (the server
// converts it to the column's type), uniqueidentifier bytes as
// mssql.UniqueIdentifier, everything else unchanged.
func KeyParam(typeName string, v any, o FormatOptions) any {
	b, ok := v.([]byte)
	if !ok {
		return v
	}
	switch upper(typeName) {
	case "DECIMAL", "NUMERIC", "MONEY", "SMALLMONEY":
		return string(b)
	case "UNIQUEIDENTIFIER":
		if len(b) == 16 {
			var u mssql.UniqueIdentifier
			if o.GUIDConversion {
				copy(u[:], b)
			} else if err := u.Scan(b); err != nil {
				return v
			}
			return u
		}
	}
	return append([]byte(nil), b...)
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}
