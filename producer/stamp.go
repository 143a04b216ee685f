package producer

import (
	"math"
	"time"
	"unsafe"

	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/streams"
)

// stamper gives each line of one source run its record time: the event
// time parsed from the line (internal/eventtime, Config.EventTime), else
// the previous line's event time (a continuation line: a stack-trace frame,
// the rest of a multi-line message), else, with no event time before it in
// this run, the time it was read (the time its bytes arrived: one time for
// the lines of one read of a file). The line's text is not changed.
//
// It runs on the reader goroutine for every line read, the lines skipped on
// a restart included, so a line's time does not depend on where frames
// were cut. After a restart the first lines have no previous event time
// until one carries a timestamp: a continuation line right at the saved
// position takes its read time.
type stamper struct {
	p       *eventtime.Parser // nil: timestamp none, every line its read time
	prev    int64             // the last event time, Unix nanos
	hasPrev bool
}

func newStamper(cfg eventtime.Config) (*stamper, error) {
	if cfg.Mode == eventtime.ModeNone {
		return &stamper{}, nil
	}
	p, err := eventtime.New(cfg)
	if err != nil {
		return nil, err
	}
	return &stamper{p: p}, nil
}

// The instants a Unix-nanosecond TS can hold.
var (
	minTS = time.Unix(0, math.MinInt64)
	maxTS = time.Unix(0, math.MaxInt64)
)

// stamp sets ln.ts and ln.tsSrc from ln.text and ln.arrived (ln.read
// where that is not known).
func (s *stamper) stamp(ln *line) {
	ln.ts, ln.tsSrc = ln.read, streams.TSRead
	if ln.arrived != 0 {
		ln.ts = ln.arrived
	}
	if s.p == nil {
		return
	}
	// A year-less timestamp is placed near the time it was read.
	s.p.SetReference(time.Unix(0, ln.ts))
	// Parse only reads the line: no copy needed.
	m, _, ok := s.p.Parse(unsafe.Slice(unsafe.StringData(ln.text), len(ln.text)))
	if ok && !m.Time.Before(minTS) && !m.Time.After(maxTS) {
		s.prev, s.hasPrev = m.Time.UnixNano(), true
		ln.ts, ln.tsSrc = s.prev, streams.TSEvent
		return
	}
	if s.hasPrev {
		ln.ts, ln.tsSrc = s.prev, streams.TSPrevious
	}
}
