package producer

import (
	"bufio"
	"errors"
	"io"
	"time"
)

// scanner splits a byte stream into lines at '\n', keeping every other byte
// ('\r', invalid UTF-8, NUL) as it is. It tracks offsets from a base and
// never buffers more of a line than it needs: a line longer than max keeps
// only its first bytes (for the dead letter) and its length.
type scanner struct {
	br      *bufio.Reader
	in      *timedReader // what br reads: notes when bytes arrive
	off     uint64       // offset of the first byte of the current (partial) line
	max     int          // longest line kept as a record
	keep    int          // bytes of a line kept in part
	part    []byte       // kept bytes of the current line, '\n' excluded
	partLen int          // full length of the current line so far
}

const readBufSize = 256 << 10

func newScanner(r io.Reader, off uint64, maxRecord int) *scanner {
	in := &timedReader{r: r, now: unixNow}
	return &scanner{br: bufio.NewReaderSize(in, readBufSize), in: in, off: off, max: maxRecord, keep: max(maxRecord, deadLetterPrefix)}
}

func unixNow() int64 { return time.Now().UnixNano() }

// timedReader notes the time of each read that returned bytes: the
// arrival time of every line that read completed. A file read in bulk
// gives the lines of one read one time (a record time that differs by
// microseconds from line to line is noise the lake would store per row),
// a followed file or a pipe the time each write was read.
type timedReader struct {
	r   io.Reader
	now func() int64
	at  int64 // time of the last read that returned bytes, Unix nanos
}

func (t *timedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.at = t.now()
	}
	return n, err
}

// reset makes s read r from offset off, forgetting any partial line.
func (s *scanner) reset(r io.Reader, off uint64) {
	s.in.r = r
	s.br.Reset(s.in)
	s.off = off
	s.part = s.part[:0]
	s.partLen = 0
}

// next returns the next complete line. At the end of the input it returns
// io.EOF and keeps a partial final line for final or a later next (the
// reader may grow).
func (s *scanner) next() (line, error) {
	for {
		chunk, err := s.br.ReadSlice('\n')
		if err == nil && s.partLen == 0 {
			// Fast path: the whole line is in the buffer.
			return s.make(chunk[:len(chunk)-1], len(chunk)), nil
		}
		if len(chunk) > 0 {
			body := chunk
			if err == nil {
				body = chunk[:len(chunk)-1]
			}
			if room := s.keep - len(s.part); room > 0 {
				s.part = append(s.part, body[:min(room, len(body))]...)
			}
			s.partLen += len(chunk)
		}
		switch {
		case err == nil:
			ln := s.make(s.part, s.partLen)
			s.part = s.part[:0]
			s.partLen = 0
			return ln, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line{}, err
		}
	}
}

// pending is the number of bytes of the partial line read so far.
func (s *scanner) pending() int { return s.partLen }

// final returns the partial line at the end of the input, if any.
func (s *scanner) final() (line, bool) {
	if s.partLen == 0 {
		return line{}, false
	}
	// n counts the line's bytes; there is no '\n' to drop.
	ln := s.makeN(s.part, s.partLen, s.partLen)
	s.part = s.part[:0]
	s.partLen = 0
	return ln, true
}

// make builds the line of n input bytes ending in '\n'.
func (s *scanner) make(text []byte, n int) line { return s.makeN(text, n-1, n) }

// makeN builds a line of textLen bytes (text holds its kept prefix) that
// consumed n input bytes.
func (s *scanner) makeN(text []byte, textLen, n int) line {
	ln := line{off: s.off, next: s.off + uint64(n), read: s.in.now(), arrived: s.in.at}
	s.off = ln.next
	if textLen > s.max {
		ln.long = textLen
		ln.text = string(text[:min(len(text), deadLetterPrefix)])
		return ln
	}
	ln.text = string(text)
	return ln
}
