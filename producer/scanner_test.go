package producer

import (
	"io"
	"testing"

	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/streams"
)

// chunkReader returns its chunks one per Read, as a pipe or a growing file
// hands over what was written.
type chunkReader struct{ chunks []string }

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// The lines of one read arrive at one time, a line a later read completes
// at that read's time; the record time of a line without an event time is
// its arrival, not the moment the scanner hands it out.
func TestLinesOfOneReadArriveTogether(t *testing.T) {
	sc := newScanner(&chunkReader{chunks: []string{"a\nb\nc", "d\ne\n", "f\n"}}, 0, 1<<20)
	var clock int64
	sc.in.now = func() int64 { clock++; return clock }
	st, err := newStamper(eventtime.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		text    string
		arrived int64
	}{{"a", 1}, {"b", 1}, {"cd", 4}, {"e", 4}, {"f", 7}} // the clock ticks at every read and every line
	var reads []int64
	for i, w := range want {
		ln, err := sc.next()
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		st.stamp(&ln)
		if ln.text != w.text || ln.arrived != w.arrived || ln.ts != w.arrived || ln.tsSrc != streams.TSRead {
			t.Errorf("line %d: %q arrived %d ts %d (%s), want %q arrived and ts %d (read)", i, ln.text, ln.arrived, ln.ts, ln.tsSrc, w.text, w.arrived)
		}
		reads = append(reads, ln.read)
	}
	for i := 1; i < len(reads); i++ {
		if reads[i] <= reads[i-1] {
			t.Errorf("read times %v: each line's own read time must still grow (finalized_until)", reads)
		}
	}
	if _, err := sc.next(); err != io.EOF {
		t.Fatalf("after the last line: %v, want EOF", err)
	}
}

// TestStampSources: eventtime.Source converts to streams.TSSource (the
// stamper's record sources, wire values) by number.
func TestStampSources(t *testing.T) {
	for src, want := range map[eventtime.Source]streams.TSSource{
		eventtime.FromRead: streams.TSRead, eventtime.FromLine: streams.TSEvent, eventtime.FromPrevious: streams.TSPrevious,
	} {
		if streams.TSSource(src) != want {
			t.Errorf("eventtime.Source %d is not streams.TSSource %v", src, want)
		}
	}
}
