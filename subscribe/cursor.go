package subscribe

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cursor is a position in the records table: commit Version (the commit
// that released the records, see the package doc), File, the index of a
// tenant among the tenants whose rows that commit releases, in name order,
// and Row within that tenant's released rows, in WAL order. The cursor of a
// subscription names the position after the last record delivered, so a
// subscription started After it resumes exactly there.
type Cursor struct {
	Version int64
	File    int
	Row     int
}

// String is the cursor's text form, "v<version>.f<file>.r<row>", which
// ParseCursor reads.
func (c Cursor) String() string {
	return fmt.Sprintf("v%d.f%d.r%d", c.Version, c.File, c.Row)
}

// ErrBadCursor reports a cursor text ParseCursor cannot read.
var ErrBadCursor = errors.New("bad cursor")

// ParseCursor reads a cursor written by Cursor.String.
func ParseCursor(s string) (Cursor, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Cursor{}, fmt.Errorf("%w %q: want v<version>.f<file>.r<row>", ErrBadCursor, s)
	}
	var n [3]int64
	for i, p := range []string{"v", "f", "r"} {
		num, ok := strings.CutPrefix(parts[i], p)
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || v < 0 || (i > 0 && v > 1<<31) {
			return Cursor{}, fmt.Errorf("%w %q: want v<version>.f<file>.r<row>", ErrBadCursor, s)
		}
		n[i] = v
	}
	return Cursor{Version: n[0], File: int(n[1]), Row: int(n[2])}, nil
}

// From is where a subscription starts.
type From struct {
	kind    fromKind
	version int64
	t       time.Time
	cursor  Cursor
}

type fromKind uint8

const (
	fromBeginning fromKind = iota
	fromNow
	fromVersion
	fromTime
	fromCursor
)

// Beginning starts with the first commit of the records table.
func Beginning() From { return From{kind: fromBeginning} }

// Now starts after the newest commit at the time of Subscribe: only
// records committed later are delivered.
func Now() From { return From{kind: fromNow} }

// Version starts with the records released by commit v: those its
// high-water covers and no earlier commit's did.
func Version(v int64) From { return From{kind: fromVersion, version: v} }

// Time starts with the first commit made at or after t (commit time, not
// record time).
func Time(t time.Time) From { return From{kind: fromTime, t: t} }

// After starts right after the record at which c was taken.
func After(c Cursor) From { return From{kind: fromCursor, cursor: c} }

// String is the From's text form, which ParseFrom reads.
func (f From) String() string {
	switch f.kind {
	case fromNow:
		return "now"
	case fromVersion:
		return strconv.FormatInt(f.version, 10)
	case fromTime:
		return f.t.Format(time.RFC3339Nano)
	case fromCursor:
		return "cursor:" + f.cursor.String()
	}
	return "beginning"
}

// ParseFrom reads "beginning", "now", a Delta version (digits), a time
// (RFC 3339, or a duration ago such as "15m") or "cursor:<cursor>".
func ParseFrom(s string, now time.Time) (From, error) {
	switch {
	case s == "" || s == "beginning":
		return Beginning(), nil
	case s == "now":
		return Now(), nil
	case strings.HasPrefix(s, "cursor:"):
		c, err := ParseCursor(strings.TrimPrefix(s, "cursor:"))
		if err != nil {
			return From{}, err
		}
		return After(c), nil
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil && v >= 0 {
		return Version(v), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return Time(t), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return Time(now.Add(-d)), nil
	}
	return From{}, fmt.Errorf("from %q: want beginning, now, a version, a time (RFC 3339 or a duration ago) or cursor:<cursor>", s)
}
