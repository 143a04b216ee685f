package producer

import (
	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/streams"
)

// stamper gives each line of one source run its record time
// (eventtime.Stamper: the event time parsed from the line, else the
// previous line's event time, else the time it was read, which is the
// time its bytes arrived: one time for the lines of one read of a file).
// The line's text is not changed.
//
// It runs on the reader goroutine for every line read, the lines skipped on
// a restart included, so a line's time does not depend on where frames
// were cut. After a restart the first lines have no previous event time
// until one carries a timestamp: a continuation line right at the saved
// position takes its read time.
type stamper struct{ s *eventtime.Stamper }

func newStamper(cfg eventtime.Config) (*stamper, error) {
	s, err := eventtime.NewStamper(cfg)
	if err != nil {
		return nil, err
	}
	return &stamper{s}, nil
}

// stamp sets ln.ts and ln.tsSrc from ln.text and ln.arrived (ln.read
// where that is not known).
func (s *stamper) stamp(ln *line) {
	read := ln.read
	if ln.arrived != 0 {
		read = ln.arrived
	}
	ts, src := s.s.Stamp(ln.text, read)
	ln.ts, ln.tsSrc = ts, streams.TSSource(src) // numbered alike
}
