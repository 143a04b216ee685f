package producer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/streams"
)

// NewFile returns a line source reading the file at path. It resumes at the
// saved position. Without Follow it stops at the end of the file (a final
// line without '\n' is a line); with Follow it polls the file for growth
// every PollInterval and:
//
//   - holds a final line without '\n' until its '\n' arrives, however
//     long that takes (a writer may be in the middle of it); on shutdown the
//     partial line stays unread and a restart reads it whole;
//   - when the file at path shrank below the offset read (truncation, or
//     rotation to a smaller file) or is another file (rename rotation, the
//     old file already read to its end), it logs, emits the old file's
//     partial final line as a line, and restarts at byte 0 of the file at
//     path. Offsets stay monotonic: the new file's byte 0 gets the offset
//     where the old one ended (its base, saved under
//     "producer.<source>.base"), so message ids never repeat. Growth of a
//     replaced file past the read offset before the next poll is not
//     noticed as a rotation unless the file identity changed.
//
// A file that shrank below the saved position while the source was down is
// read from byte 0 as well (logged). The source assumes the bytes below
// the saved position are unchanged otherwise.
func NewFile(cfg Config, deps Deps, path string) (*Lines, error) {
	cfg = cfg.Defaults()
	source := cfg.Source
	if source == "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			abs = path
		}
		source = streams.SanitizeToken(abs)
	}
	fs := &fileSource{path: path, follow: cfg.Follow, poll: cfg.PollInterval, maxRec: cfg.MaxRecordBytes}
	l, err := newLines(cfg, deps, fs, source)
	if err != nil {
		return nil, err
	}
	return l, nil
}

type fileSource struct {
	path   string
	follow bool
	poll   time.Duration
	maxRec int

	l    *Lines
	f    *os.File
	base uint64 // offset of the current file's byte 0
	sc   *scanner
}

func (s *fileSource) kind() string    { return "file " + s.path }
func (s *fileSource) resumable() bool { return true }

func (s *fileSource) start(ctx context.Context, l *Lines, pos, _ uint64) (uint64, error) {
	s.l = l
	f, err := os.Open(s.path)
	if err != nil {
		return 0, fmt.Errorf("open input: %w", err)
	}
	s.f = f
	kctx, cancel := backoff.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if e, err := l.positions.Get(kctx, baseKey(l.source)); err == nil {
		if s.base, err = strconv.ParseUint(string(e.Value()), 10, 64); err != nil {
			return 0, fmt.Errorf("offset base %s: %q is not an offset", baseKey(l.source), e.Value())
		}
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, fmt.Errorf("load offset base %s: %w", baseKey(l.source), err)
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat input: %w", err)
	}
	var at uint64 // file offset to start at
	switch {
	case pos < s.base:
		l.log.Warn("saved position is before the file's offset base; the old content is gone, reading from byte 0", "position", pos, "base", s.base)
		pos = s.base
	case uint64(fi.Size()) < pos-s.base:
		l.log.Warn("input shrank below the saved position; reading from byte 0", "position", pos, "size", fi.Size())
		if err := s.saveBase(kctx, pos); err != nil {
			return 0, err
		}
	default:
		at = pos - s.base
	}
	if _, err := f.Seek(int64(at), io.SeekStart); err != nil {
		return 0, fmt.Errorf("seek input to %d: %w", at, err)
	}
	s.sc = newScanner(f, pos, s.maxRec)
	return pos, nil
}

func (s *fileSource) saveBase(ctx context.Context, base uint64) error {
	if !s.l.hookNoSave {
		if _, err := s.l.positions.Put(ctx, baseKey(s.l.source), []byte(strconv.FormatUint(base, 10))); err != nil {
			return fmt.Errorf("save offset base %s: %w", baseKey(s.l.source), err)
		}
	}
	s.base = base
	return nil
}

func (s *fileSource) run(ctx context.Context, e *emitter) (uint64, error) {
	for {
		ln, err := s.sc.next()
		if err == nil {
			if err := e.add(ctx, ln); err != nil {
				return 0, err
			}
			continue
		}
		if !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("read %s: %w", s.path, err)
		}
		if !s.follow {
			if ln, ok := s.sc.final(); ok {
				if err := e.add(ctx, ln); err != nil {
					return 0, err
				}
			}
			return s.sc.off, nil
		}
		if err := e.flush(ctx); err != nil {
			return 0, err
		}
		if err := s.wait(ctx); err != nil {
			return 0, err
		}
		if err := s.checkRotation(ctx, e); err != nil {
			return 0, err
		}
	}
}

func (s *fileSource) wait(ctx context.Context) error {
	if !backoff.Sleep(ctx, s.poll) {
		return ctx.Err()
	}
	return nil
}

// checkRotation restarts at byte 0 of the file at path when it shrank
// below the read offset or is another file. The scanner is at the end of
// the current file.
func (s *fileSource) checkRotation(ctx context.Context, e *emitter) error {
	pfi, err := os.Stat(s.path)
	if err != nil {
		// Renamed away and not yet recreated: keep the old file.
		return nil
	}
	ffi, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("stat input: %w", err)
	}
	read := s.sc.off - s.base + uint64(s.sc.pending())
	shrank := uint64(pfi.Size()) < read
	other := !os.SameFile(pfi, ffi)
	if !shrank && !other {
		return nil
	}
	if other {
		// Read the old file to its end first.
		for {
			ln, err := s.sc.next()
			if err != nil {
				break
			}
			if err := e.add(ctx, ln); err != nil {
				return err
			}
		}
	}
	if ln, ok := s.sc.final(); ok {
		if err := e.add(ctx, ln); err != nil {
			return err
		}
	}
	if err := e.flush(ctx); err != nil {
		return err
	}
	s.l.log.Warn("input truncated or rotated; reading from byte 0", "path", s.path, "size", pfi.Size(), "read", read,
		"other_file", other, "new_base", s.sc.off)
	f := s.f
	if other {
		nf, err := os.Open(s.path)
		if err != nil {
			return fmt.Errorf("reopen input: %w", err)
		}
		s.f.Close()
		s.f, f = nf, nf
	} else if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("seek input to 0: %w", err)
	}
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.saveBase(kctx, s.sc.off); err != nil {
		return err
	}
	s.sc.reset(f, s.sc.off)
	return nil
}

func (s *fileSource) close() error {
	if s.f != nil {
		return s.f.Close()
	}
	return nil
}
