package sqlserver

import (
	"bytes"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// LSN is a SQL Server log sequence number as CDC stores it: binary(10),
// compared as unsigned big-endian bytes. The zero LSN is "none".
type LSN [10]byte

// ErrBadLSN reports text or bytes that are not an LSN.
var ErrBadLSN = errors.New("invalid LSN")

// ParseLSN parses the hex text form SQL Server prints for binary(10)
// ("0x0000002A000001F00003", case-insensitive, 20 hex digits after 0x) or
// the log form "0000002a:000001f0:0003" (VLF:block:slot in hex).
func ParseLSN(s string) (LSN, error) {
	var l LSN
	t := strings.TrimSpace(s)
	if parts := strings.Split(t, ":"); len(parts) == 3 {
		widths := [3]int{8, 8, 4}
		var hexs strings.Builder
		for i, p := range parts {
			if len(p) == 0 || len(p) > widths[i] {
				return l, fmt.Errorf("%w: %q: part %d has %d hex digits, at most %d", ErrBadLSN, s, i+1, len(p), widths[i])
			}
			hexs.WriteString(strings.Repeat("0", widths[i]-len(p)) + p)
		}
		t = "0x" + hexs.String()
	}
	if len(t) < 2 || (t[:2] != "0x" && t[:2] != "0X") {
		return l, fmt.Errorf("%w: %q: want 0x followed by 20 hex digits", ErrBadLSN, s)
	}
	t = t[2:]
	if len(t) != 20 {
		return l, fmt.Errorf("%w: %q: %d hex digits, want 20", ErrBadLSN, s, len(t))
	}
	if _, err := hex.Decode(l[:], []byte(t)); err != nil {
		return LSN{}, fmt.Errorf("%w: %q: %v", ErrBadLSN, s, err)
	}
	return l, nil
}

// LSNFromBytes converts a binary(10) value.
func LSNFromBytes(b []byte) (LSN, error) {
	var l LSN
	if len(b) != len(l) {
		return l, fmt.Errorf("%w: %d bytes, want 10", ErrBadLSN, len(b))
	}
	copy(l[:], b)
	return l, nil
}

// String is SQL Server's text form of binary(10): "0x" and 20 upper-case
// hex digits.
func (l LSN) String() string {
	var b [22]byte
	b[0], b[1] = '0', 'x'
	const digits = "0123456789ABCDEF"
	for i, c := range l {
		b[2+2*i] = digits[c>>4]
		b[3+2*i] = digits[c&15]
	}
	return string(b[:])
}

// IsZero reports whether l is the zero LSN (no LSN). sys.fn_cdc_get_min_lsn
// returns it for a capture instance that does not exist.
func (l LSN) IsZero() bool { return l == LSN{} }

// Compare returns -1, 0 or +1 as l is before, equal to or after o.
func (l LSN) Compare(o LSN) int { return bytes.Compare(l[:], o[:]) }

// Prev returns the value just below l as an 80-bit unsigned integer, for
// turning an exclusive upper bound into an inclusive one (l - 1 is not
// necessarily an LSN the server ever issued, but compares correctly).
// Prev of the zero LSN is zero.
func (l LSN) Prev() LSN {
	if l.IsZero() {
		return l
	}
	for i := len(l) - 1; i >= 0; i-- {
		if l[i] > 0 {
			l[i]--
			return l
		}
		l[i] = 0xFF
	}
	return l
}

// Value implements driver.Valuer: binary(10) bytes.
func (l LSN) Value() (driver.Value, error) { return l[:], nil }

// Scan implements sql.Scanner for binary(10) columns.
func (l *LSN) Scan(v any) error {
	switch b := v.(type) {
	case []byte:
		x, err := LSNFromBytes(b)
		if err != nil {
			return err
		}
		*l = x
		return nil
	case nil:
		*l = LSN{}
		return nil
	default:
		return fmt.Errorf("%w: cannot scan %T", ErrBadLSN, v)
	}
}

// MarshalText and UnmarshalText use the 0x form, so LSNs are readable in
// JSON and YAML.
func (l LSN) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText parses the forms ParseLSN accepts.
func (l *LSN) UnmarshalText(b []byte) error {
	x, err := ParseLSN(string(b))
	if err != nil {
		return err
	}
	*l = x
	return nil
}

// Operation is a change table's __$operation.
type Operation uint8

// Operations as SQL Server numbers them.
const (
	OpDelete       Operation = 1
	OpInsert       Operation = 2
	OpUpdateBefore Operation = 3
	OpUpdateAfter  Operation = 4
	// OpSnapshot marks a row read by the bootstrap snapshot (not a change).
	OpSnapshot Operation = 0
)

// String is the name carried in the "_op" attribute.
func (o Operation) String() string {
	switch o {
	case OpDelete:
		return "delete"
	case OpInsert:
		return "insert"
	case OpUpdateBefore:
		return "update_before"
	case OpUpdateAfter:
		return "update_after"
	case OpSnapshot:
		return "snapshot"
	default:
		return "op" + strconv.Itoa(int(o))
	}
}

// ParseOperation maps a change table __$operation value; other values are
// an error.
func ParseOperation(v int64) (Operation, error) {
	if v < 1 || v > 4 {
		return 0, fmt.Errorf("__$operation %d: want 1 (delete), 2 (insert), 3 (update before) or 4 (update after)", v)
	}
	return Operation(v), nil
}

// Position is a place in a capture instance's change stream: the key of the
// last change consumed, in the order SQL Server documents for applying
// changes: (__$start_lsn, __$command_id, __$seqval, __$operation).
//
// TxEnd means every change with __$start_lsn <= LSN is consumed (the other
// key fields are then ignored). The zero Position is before everything.
type Position struct {
	LSN       LSN       `json:"lsn"`
	CommandID int64     `json:"command_id,omitempty"`
	SeqVal    LSN       `json:"seqval"`
	Op        Operation `json:"op,omitempty"`
	TxEnd     bool      `json:"tx_end,omitempty"`
}

// Through is the Position after every change at or before lsn.
func Through(lsn LSN) Position { return Position{LSN: lsn, TxEnd: true} }

// IsZero reports whether p is before every change.
func (p Position) IsZero() bool { return p == Position{} }

// Compare orders positions; a TxEnd position sorts after every change at
// its LSN.
func (p Position) Compare(q Position) int {
	if c := p.LSN.Compare(q.LSN); c != 0 {
		return c
	}
	switch {
	case p.TxEnd && q.TxEnd:
		return 0
	case p.TxEnd:
		return 1
	case q.TxEnd:
		return -1
	}
	if p.CommandID != q.CommandID {
		if p.CommandID < q.CommandID {
			return -1
		}
		return 1
	}
	if c := p.SeqVal.Compare(q.SeqVal); c != 0 {
		return c
	}
	switch {
	case p.Op < q.Op:
		return -1
	case p.Op > q.Op:
		return 1
	}
	return 0
}

// String is a compact, deterministic text form used in message ids:
// "<lsn>:<command id>:<seqval>:<op>" or "<lsn>:end".
func (p Position) String() string {
	if p.TxEnd {
		return p.LSN.String() + ":end"
	}
	return p.LSN.String() + ":" + strconv.FormatInt(p.CommandID, 10) + ":" + p.SeqVal.String() + ":" + strconv.Itoa(int(p.Op))
}
