package eventtime

import (
	"math"
	"time"
	"unsafe"
)

// Source is where a Stamper's time for a line comes from. The values are
// streams.TSSource's (wire values, never renumbered), so that a Source
// converts to one (producer's TestStampSources holds them equal).
type Source uint8

const (
	// FromRead: the time the line was read (no event time in the line
	// and none before it in this run).
	FromRead Source = iota
	// FromLine: the event time parsed from the line.
	FromLine
	// FromPrevious: the event time of the last line that had one (a
	// continuation line: a stack-trace frame, the rest of a multi-line
	// message).
	FromPrevious
)

// A Stamper gives each line of one source run its record time: the event
// time parsed from the line, else the previous line's event time, else
// the time it was read. A year-less timestamp is placed near the read
// time. It is the one implementation of that rule: the producer stamps
// every line with it, and tests that mine lines as the pipeline does use
// it too. One goroutine's.
type Stamper struct {
	p       *Parser // nil: timestamp none, every line its read time
	prev    int64   // the last event time, Unix nanos
	hasPrev bool
}

// NewStamper returns the Stamper of cfg; cfg.Mode none stamps every line
// with its read time.
func NewStamper(cfg Config) (*Stamper, error) {
	if cfg.Mode == ModeNone {
		return &Stamper{}, nil
	}
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &Stamper{p: p}, nil
}

// The instants a Unix-nanosecond time can hold.
var (
	minTS = time.Unix(0, math.MinInt64)
	maxTS = time.Unix(0, math.MaxInt64)
)

// InNanos reports whether t is an instant a Unix-nanosecond int64 holds
// (years 1678 to 2262): a record time must be.
func InNanos(t time.Time) bool { return !t.Before(minTS) && !t.After(maxTS) }

// Stamp returns the record time (Unix nanos) of the next line, text, read
// at read (Unix nanos), and where it comes from. The text is only read.
func (s *Stamper) Stamp(text string, read int64) (int64, Source) {
	if s.p == nil {
		return read, FromRead
	}
	s.p.SetReference(time.Unix(0, read))
	m, _, ok := s.p.Parse(unsafe.Slice(unsafe.StringData(text), len(text)))
	if ok && InNanos(m.Time) {
		s.prev, s.hasPrev = m.Time.UnixNano(), true
		return s.prev, FromLine
	}
	if s.hasPrev {
		return s.prev, FromPrevious
	}
	return read, FromRead
}
