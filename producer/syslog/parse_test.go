package syslog

import (
	"bufio"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/streams"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	ts := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name string
		in   string
		want Message
		bad  string // substring of the error; "" = parses
	}{
		{name: "5424 full", in: `<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog 42 ID47 [exampleSDID@32473 iut="3" eventSource="Application"] An application event`,
			want: Message{Format: RFC5424, Facility: 20, Severity: 5, TS: ts("2003-10-11T22:14:15.003Z"), Host: "mymachine.example.com", App: "evntslog", ProcID: "42", MsgID: "ID47",
				SD: []streams.Attr{{Key: "exampleSDID@32473.iut", Value: "3"}, {Key: "exampleSDID@32473.eventSource", Value: "Application"}}, Msg: "An application event"}},
		{name: "5424 nil fields no msg", in: `<14>1 - - - - - -`, want: Message{Format: RFC5424, Facility: 1, Severity: 6}},
		{name: "5424 bom and offset", in: "<34>1 2003-10-11T22:14:15.003-07:00 host su - ID47 - \ufeff'su root' failed",
			want: Message{Format: RFC5424, Facility: 4, Severity: 2, TS: ts("2003-10-11T22:14:15.003-07:00"), Host: "host", App: "su", MsgID: "ID47", Msg: "'su root' failed"}},
		{name: "5424 sd escapes, two elements", in: `<13>1 - h a - - [x@1 k="a\"b\\c\]d"][y@2] m`,
			want: Message{Format: RFC5424, Facility: 1, Severity: 5, Host: "h", App: "a", SD: []streams.Attr{{Key: "x@1.k", Value: `a"b\c]d`}}, Msg: "m"}},
		{name: "5424 trailing crlf", in: "<13>1 - h a - - - msg\r\n", want: Message{Format: RFC5424, Facility: 1, Severity: 5, Host: "h", App: "a", Msg: "msg"}},
		{name: "3164 classic", in: `<34>Oct 11 22:14:15 mymachine su[123]: 'su root' failed for lonvick on /dev/pts/8`,
			want: Message{Format: RFC3164, Facility: 4, Severity: 2, TS: time.Date(2025, 10, 11, 22, 14, 15, 0, time.UTC), Host: "mymachine", App: "su", ProcID: "123", Msg: "'su root' failed for lonvick on /dev/pts/8"}},
		{name: "3164 single-digit day, december last year", in: `<13>Dec  3 01:02:03 box cron: ran`,
			want: Message{Format: RFC3164, Facility: 1, Severity: 5, TS: time.Date(2025, 12, 3, 1, 2, 3, 0, time.UTC), Host: "box", App: "cron", Msg: "ran"}},
		{name: "3164 rfc3339 (rsyslog forward format)", in: `<30>2026-01-05T11:00:00.5+00:00 web nginx[7]: GET /`,
			want: Message{Format: RFC3164, Facility: 3, Severity: 6, TS: ts("2026-01-05T11:00:00.5+00:00"), Host: "web", App: "nginx", ProcID: "7", Msg: "GET /"}},
		{name: "3164 no host (local logger)", in: `<13>Jan  5 11:59:00 tag: hello`,
			want: Message{Format: RFC3164, Facility: 1, Severity: 5, TS: time.Date(2026, 1, 5, 11, 59, 0, 0, time.UTC), App: "tag", Msg: "hello"}},
		{name: "3164 no timestamp", in: `<13>just text`, want: Message{Format: RFC3164, Facility: 1, Severity: 5, Msg: "just text"}},
		{name: "3164 empty msg", in: `<0>`, want: Message{Format: RFC3164}},
		{name: "pri 191", in: `<191>x`, want: Message{Format: RFC3164, Facility: 23, Severity: 7, Msg: "x"}},

		{name: "empty", in: "", bad: "empty message"},
		{name: "no pri", in: "Oct 11 22:14:15 host app: x", bad: "no <PRI>"},
		{name: "pri not closed", in: "<1234 x", bad: "<PRI> is not 1 to 3 digits"},
		{name: "pri empty", in: "<>x", bad: "<PRI> is not 1 to 3 digits"},
		{name: "pri letters", in: "<1a>x", bad: "not a number"},
		{name: "pri leading zero", in: "<013>x", bad: "leading zero"},
		{name: "pri too big", in: "<192>x", bad: "above 191"},
		{name: "5424 bad timestamp", in: "<13>1 yesterday h a - - - m", bad: "TIMESTAMP"},
		{name: "5424 truncated header", in: "<13>1 - h a", bad: "ends before APP-NAME"},
		{name: "5424 double space", in: "<13>1 -  a - - - m", bad: "empty HOSTNAME"},
		{name: "5424 app too long", in: "<13>1 - h " + strings.Repeat("a", 49) + " - - - m", bad: "APP-NAME of 49 bytes"},
		{name: "5424 bad sd", in: "<13>1 - h a - - x m", bad: "neither '-' nor '['"},
		{name: "5424 unterminated sd value", in: `<13>1 - h a - - [x k="v] m`, bad: "no closing"},
		{name: "5424 sd without space before msg", in: `<13>1 - h a - - [x]m`, bad: "no space between"},
		{name: "5424 sd param without quotes", in: `<13>1 - h a - - [x k=v] m`, bad: `want ="`},
		{name: "5424 control byte in host", in: "<13>1 - h\x01 a - - - m", bad: "outside printable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in), now, time.UTC)
			if tt.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tt.bad) || !errors.Is(err, ErrMalformed) {
					t.Fatalf("err %v, want ErrMalformed containing %q", err, tt.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.TS.Equal(tt.want.TS) {
				t.Fatalf("TS %v, want %v", got.TS, tt.want.TS)
			}
			got.TS, tt.want.TS = time.Time{}, time.Time{}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestAttrs(t *testing.T) {
	m := Message{Facility: 16, Severity: 3, Host: "h", App: "a", MsgID: "m", SD: []streams.Attr{{Key: "x.k", Value: "v"}}}
	want := []streams.Attr{{Key: "syslog.facility", Value: "local0"}, {Key: "syslog.severity", Value: "err"},
		{Key: "host", Value: "h"}, {Key: "app", Value: "a"}, {Key: "syslog.msgid", Value: "m"}, {Key: "sd.x.k", Value: "v"}}
	if got := m.Attrs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog 42 ID47 [exampleSDID@32473 iut="3"] An application event`,
		`<34>Oct 11 22:14:15 mymachine su[123]: 'su root' failed`, `<13>1 - - - - - -`, `<13>1 - h a - - [x k="a\"b"] m`,
		`<30>2026-01-05T11:00:00.5+00:00 web nginx[7]: GET /`, "<0>", "<", "",
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b, now, time.UTC)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if m.Facility < 0 || m.Facility > 23 || m.Severity < 0 || m.Severity > 7 {
			t.Fatalf("pri out of range: %+v", m)
		}
		if len(m.Msg) > len(b) {
			t.Fatalf("msg longer than the input")
		}
		_ = m.Attrs()
	})
}

func TestFramer(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want []string // "!" prefix: bad
	}{
		{name: "newline", in: "<13>a\n<13>b\r\n\n<13>c", max: 100, want: []string{"<13>a", "<13>b", "<13>c"}},
		{name: "octet", in: "5 <13>a6 <13>bc", max: 100, want: []string{"<13>a", "<13>bc"}},
		{name: "octet with newlines inside", in: "9 <13>a\nb\nc", max: 100, want: []string{"<13>a\nb\nc"}},
		{name: "newline too long", in: "<13>" + strings.Repeat("x", 200) + "\n<13>ok\n", max: 100, want: []string{"!<13>" + strings.Repeat("x", 200), "<13>ok"}},
		{name: "octet too long", in: "10 <13>xxxxxx6 <13>ok", max: 8, want: []string{"!<13>xxxxxx", "<13>ok"}},
		{name: "octet broken", in: "5 <13>ax <13>b", max: 100, want: []string{"<13>a", "!x <13>b"}},
		// Past the 16-byte buffer: what follows the break comes as it is
		// read, every byte of it dead-lettered.
		{name: "octet broken, rest past the buffer", in: "5 <13>ax" + strings.Repeat("y", 40) + "\n9 <13>after", max: 100,
			want: []string{"<13>a", "!x" + strings.Repeat("y", 40) + "\n9 <13>after"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := &framer{r: newReader(tt.in), max: tt.max}
			var got []string
			for _, m := range frames(fr.next) { // what follows a break joined
				switch {
				case m.err != nil:
				case m.bad != "":
					got = append(got, "!"+m.msg)
				default:
					got = append(got, m.msg)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzFramer(f *testing.F) {
	f.Add([]byte("5 <13>a6 <13>bc"), true)
	f.Add([]byte("<13>a\n<13>b\n"), false)
	f.Fuzz(func(t *testing.T, b []byte, _ bool) {
		fr := &framer{r: newReader(string(b)), max: 64}
		total := 0
		for range len(b) + 2 {
			msg, bad, err := fr.next()
			if err != nil {
				return
			}
			if bad == "" && len(msg) > 64 {
				t.Fatalf("message of %d bytes above max", len(msg))
			}
			total += len(msg)
		}
		t.Fatalf("framer did not end on %d bytes", len(b))
	})
}

// newReader reads s through the smallest buffer, so that messages span
// several fills.
func newReader(s string) *bufio.Reader { return bufio.NewReaderSize(strings.NewReader(s), 16) }
