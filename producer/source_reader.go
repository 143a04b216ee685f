package producer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// NewReader returns a line source reading r (stdin) to its end. It does not
// resume: offsets are byte offsets from the start of this run, and the
// source id is "<source>-<run id>" (Source defaults to "stdin") so message
// ids never collide across runs. On shutdown a read blocked on r is
// abandoned after a grace period (an os.Stdin read cannot be interrupted).
func NewReader(cfg Config, deps Deps, r io.Reader) (*Lines, error) {
	cfg = cfg.Defaults()
	base := cfg.Source
	if base == "" {
		base = "stdin"
	}
	return newLines(cfg, deps, &readerSource{r: r, maxRec: cfg.MaxRecordBytes}, base+"-"+runID())
}

// runID is a short id unique per run: time plus randomness.
func runID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(time.Now().UnixMilli(), 36) + hex.EncodeToString(b[:])
}

// readerSource reads an io.Reader from its start. With skip it is
// resumable: it re-reads and discards the bytes below the position (for
// deterministic inputs such as the generator).
type readerSource struct {
	r      io.Reader
	maxRec int
	skip   bool
	name   string
	sc     *scanner
}

func (s *readerSource) kind() string {
	if s.name != "" {
		return s.name
	}
	return "reader"
}
func (s *readerSource) resumable() bool { return s.skip }

func (s *readerSource) start(_ context.Context, _ *Lines, pos, _ uint64) (uint64, error) {
	if s.skip && pos > 0 {
		n, err := io.CopyN(io.Discard, s.r, int64(pos))
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("skip to position %d: %w", pos, err)
		}
		pos = uint64(n)
	}
	s.sc = newScanner(s.r, pos, s.maxRec)
	return pos, nil
}

func (s *readerSource) run(ctx context.Context, e *emitter) (uint64, error) {
	// Hand over what was read before a read that may block.
	s.sc.br.Reset(&flushReader{r: s.r, ctx: ctx, e: e})
	for {
		ln, err := s.sc.next()
		if err == nil {
			if err := e.add(ctx, ln); err != nil {
				return 0, err
			}
			continue
		}
		if !errors.Is(err, io.EOF) {
			if cerr := ctx.Err(); cerr != nil {
				return 0, cerr
			}
			return 0, err
		}
		if ln, ok := s.sc.final(); ok {
			if err := e.add(ctx, ln); err != nil {
				return 0, err
			}
		}
		return s.sc.off, nil
	}
}

func (s *readerSource) close() error { return nil }

// flushReader flushes the emitter before each read of the underlying
// reader, so lines are not held back while a read blocks.
type flushReader struct {
	r   io.Reader
	ctx context.Context
	e   *emitter
}

func (f *flushReader) Read(p []byte) (int, error) {
	if err := f.e.flush(f.ctx); err != nil {
		return 0, err
	}
	if err := f.ctx.Err(); err != nil {
		return 0, err
	}
	return f.r.Read(p)
}
