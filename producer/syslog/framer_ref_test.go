package syslog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// refFramer is the framer as it was before it returned messages in the
// reader's buffer (every message copied): the straightforward
// implementation FuzzFramerAgrees holds the framer to.
type refFramer struct {
	r      *bufio.Reader
	max    int
	mode   byte
	broken bool
}

func (f *refFramer) next() (msg []byte, bad string, err error) {
	if f.broken {
		// After broken framing: everything that follows, in one copy.
		rest, err := io.ReadAll(f.r)
		if err != nil || len(rest) == 0 {
			return nil, "", cmpErr(err)
		}
		return rest, brokenRest, nil
	}
	if f.mode == 0 {
		b, err := f.r.Peek(1)
		if err != nil {
			return nil, "", err
		}
		f.mode = 'n'
		if b[0] >= '1' && b[0] <= '9' {
			f.mode = 'o'
		}
	}
	if f.mode == 'o' {
		return f.octet()
	}
	return f.newline()
}

func (f *refFramer) octet() ([]byte, string, error) {
	n := 0
	var digits []byte
	for {
		c, err := f.r.ReadByte()
		if err != nil {
			if len(digits) == 0 && errors.Is(err, io.EOF) {
				return nil, "", io.EOF
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, "", err
		}
		if c == ' ' && len(digits) > 0 {
			break
		}
		if c < '0' || c > '9' || len(digits) >= 9 {
			// The framing is lost: the break's bytes, then the rest
			// of the stream (next).
			f.broken = true
			msg := append(digits, c)
			return msg, fmt.Sprintf("octet-counted framing broken: byte %q where the length or its space belongs", c), nil
		}
		n = n*10 + int(c-'0')
		digits = append(digits, c)
	}
	if n > f.max {
		msg := make([]byte, min(n, deadPrefix))
		if _, err := io.ReadFull(f.r, msg); err != nil {
			return nil, "", err
		}
		if _, err := f.r.Discard(n - len(msg)); err != nil {
			return nil, "", err
		}
		return msg, fmt.Sprintf("message of %d bytes exceeds producer.receivers.max_line_bytes %d", n, f.max), nil
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(f.r, msg); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, "", err
	}
	return msg, "", nil
}

func (f *refFramer) newline() ([]byte, string, error) {
	for {
		msg, bad, err := f.line()
		// An empty line between messages is no message.
		if err != nil || bad != "" || len(msg) > 0 {
			return msg, bad, err
		}
	}
}

func (f *refFramer) line() ([]byte, string, error) {
	var msg []byte
	long := 0
	for {
		frag, err := f.r.ReadSlice('\n')
		if long == 0 && len(msg)+len(frag) <= f.max+1 {
			msg = append(msg, frag...)
		} else {
			if long == 0 {
				long = len(msg)
				msg = msg[:min(len(msg), deadPrefix)]
			}
			long += len(frag)
			if room := deadPrefix - len(msg); room > 0 {
				msg = append(msg, frag[:min(room, len(frag))]...)
			}
		}
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && (len(msg) > 0 || long > 0) {
			break // a last message without its '\n'
		}
		return nil, "", err
	}
	if long > 0 {
		return trimEOL(msg), fmt.Sprintf("message of %d bytes exceeds producer.receivers.max_line_bytes %d", long, f.max), nil
	}
	msg = trimEOL(msg)
	if len(msg) > f.max {
		return msg, fmt.Sprintf("message of %d bytes exceeds producer.receivers.max_line_bytes %d", len(msg), f.max), nil
	}
	return msg, "", nil
}

type framed struct {
	msg, bad string
	err      error
}

// cmpErr is err, or io.EOF for nil: io.ReadAll's end of the stream.
func cmpErr(err error) error {
	if err == nil {
		return io.EOF
	}
	return err
}

// frames reads every message next gives to its error, copying each before
// the next call as serveConn does. The bytes that follow broken framing
// come in pieces as they are buffered: they are joined into the message
// of the break (what was dead-lettered, in order), so that streams read
// through different buffers compare.
func frames(next func() ([]byte, string, error)) []framed {
	var out []framed
	for range 1 << 16 {
		msg, bad, err := next()
		if bad == brokenRest && len(out) > 0 {
			out[len(out)-1].msg += string(msg)
			continue
		}
		out = append(out, framed{string(msg), bad, err})
		if err != nil {
			break
		}
	}
	return out
}

// The framer cuts every stream as the copying framer does, messages, bad
// reasons and errors alike, through a buffer smaller and one larger than
// the messages.
func FuzzFramerAgrees(f *testing.F) {
	f.Add([]byte("5 <13>a6 <13>bc"), 16)
	f.Add([]byte("<13>a\n<13>b\r\n\n<13>c"), 16)
	f.Add([]byte("10 <13>xxxxxx6 <13>ok"), 16)
	f.Add([]byte("5 <13>ax <13>b"), 64)
	f.Add([]byte("<13>"+strings.Repeat("x", 200)+"\n<13>ok\n"), 4096)
	f.Add([]byte("30 <13>short"), 16)
	f.Add([]byte("30 <13>sh"+strings.Repeat("\"", 27)), 16) // the break's rest past the buffer
	f.Fuzz(func(t *testing.T, b []byte, size int) {
		size = 16 + size&1023
		for _, max := range []int{8, 64, 100000} {
			fr := &framer{r: bufio.NewReaderSize(strings.NewReader(string(b)), size), max: max}
			ref := &refFramer{r: bufio.NewReaderSize(strings.NewReader(string(b)), size), max: max}
			got := frames(fr.next)
			want := frames(ref.next)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("max %d, buffer %d, %q:\ngot  %+v\nwant %+v", max, size, b, got, want)
			}
		}
	})
}
