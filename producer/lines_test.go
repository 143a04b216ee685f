package producer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/producer/internal/floortest"
	"github.com/quarrylake/quarry/streams"
)

// walFrames returns every frame in the WAL on subject, in WAL order.
func walFrames(t testing.TB, js jetstream.JetStream, subject string) []*streams.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, info := streamInfo(t, js, streams.WALStream)
	var out []*streams.Frame
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != subject {
			continue
		}
		f, err := streams.DecodeFrame(m.Data)
		if err != nil {
			t.Fatalf("wal seq %d: %v", seq, err)
		}
		if got, want := m.Header.Get(streams.HeaderMsgID), streams.FrameMsgID(f.Source, f.FirstOffset); got != want {
			t.Fatalf("wal seq %d: msg id %q, want %q", seq, got, want)
		}
		out = append(out, f)
	}
	return out
}

func walLines(t testing.TB, js jetstream.JetStream, subject string) []string {
	var out []string
	for _, f := range walFrames(t, js, subject) {
		for _, r := range f.Records {
			out = append(out, r.Text)
		}
	}
	return out
}

func writeFile(t testing.TB, path string, lines []string, appendTo bool) {
	t.Helper()
	flag := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if appendTo {
		flag = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if _, err := f.WriteString(l + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func numbered(from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("line %06d user=u%d took %dms", from+i, (from+i)%17, (from+i)%1000)
	}
	return out
}

func runLines(t testing.TB, l *Lines) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := l.Run(ctx); err != nil {
		t.Fatalf("run: %v", err)
	}
}

func equalLines(t testing.TB, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("WAL holds %d lines, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("line %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func position(t testing.TB, js jetstream.JetStream, source string) uint64 {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), streams.PositionsBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), PositionKey(source))
	if err != nil {
		t.Fatalf("position of %s: %v", source, err)
	}
	p, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFraming(t *testing.T) {
	js := testJS(t)
	dir := t.TempDir()
	long := strings.Repeat("x", 100)
	for _, tc := range []struct {
		name      string
		cfg       Config
		lines     []string
		wantSizes []int // records per frame; nil: check bytes
	}{
		{"count", Config{FrameMaxRecords: 10, Linger: time.Hour}, numbered(0, 95), []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 5}},
		{"one per frame", Config{FrameMaxRecords: 1, Linger: time.Hour}, numbered(0, 3), []int{1, 1, 1}},
		{"bytes", Config{FrameMaxBytes: 1024, Linger: time.Hour}, func() []string {
			var o []string
			for i := 0; i < 50; i++ {
				o = append(o, long)
			}
			return o
		}(), nil},
		{"empty file", Config{}, nil, []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Tenant = "t-" + strings.ReplaceAll(tc.name, " ", "-")
			path := filepath.Join(dir, tc.name)
			writeFile(t, path, tc.lines, false)
			l, err := NewFile(tc.cfg, Deps{JS: js}, path)
			if err != nil {
				t.Fatal(err)
			}
			runLines(t, l)
			frames := walFrames(t, js, streams.LineSubject(tc.cfg.Tenant))
			var got []string
			var sizes []int
			var next uint64
			for _, f := range frames {
				sizes = append(sizes, len(f.Records))
				if f.FirstOffset != next {
					t.Fatalf("frame starts at %d, want %d (frames are contiguous)", f.FirstOffset, next)
				}
				next = f.NextOffset
				if n := len(streams.AppendFrame(nil, f)); tc.wantSizes == nil && n > 1024 {
					t.Fatalf("frame of %d bytes > frame_max_bytes 1024", n)
				}
				for _, r := range f.Records {
					got = append(got, r.Text)
				}
			}
			if tc.wantSizes != nil && fmt.Sprint(sizes) != fmt.Sprint(tc.wantSizes) {
				t.Fatalf("frame sizes %v, want %v", sizes, tc.wantSizes)
			}
			if tc.wantSizes == nil && (len(sizes) < 5 || sizes[0] < 2) {
				t.Fatalf("frame sizes %v: not cut by bytes", sizes)
			}
			equalLines(t, got, tc.lines)
			st := l.Stats()
			if st.Lines != uint64(len(tc.lines)) || st.Frames != uint64(len(frames)) {
				t.Fatalf("stats %+v", st)
			}
			if p := position(t, js, l.Source()); p != next && len(frames) > 0 {
				t.Fatalf("position %d, want %d", p, next)
			}
		})
	}
}

func TestFramingLinger(t *testing.T) {
	js := testJS(t)
	pr, pw := io.Pipe()
	l, err := NewReader(Config{Tenant: "linger", Linger: 20 * time.Millisecond}, Deps{JS: js}, pr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(l.Source(), "stdin-") {
		t.Fatalf("source %q", l.Source())
	}
	done := make(chan error, 1)
	go func() { done <- l.Run(context.Background()) }()
	fmt.Fprint(pw, "a\nb\nc\n")
	waitFor(t, func() bool { return len(walFrames(t, js, streams.LineSubject("linger"))) == 1 })
	fmt.Fprint(pw, "d\ne")
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	frames := walFrames(t, js, streams.LineSubject("linger"))
	if len(frames) != 2 || len(frames[0].Records) != 3 || len(frames[1].Records) != 2 {
		t.Fatalf("frames %+v", frames)
	}
	equalLines(t, walLines(t, js, streams.LineSubject("linger")), []string{"a", "b", "c", "d", "e"})
	if frames[1].NextOffset != 9 {
		t.Fatalf("next offset %d, want 9", frames[1].NextOffset)
	}
	// A reader source does not save positions.
	kv, _ := js.KeyValue(context.Background(), streams.PositionsBucket)
	if _, err := kv.Get(context.Background(), PositionKey(l.Source())); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("reader saved a position: %v", err)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLosslessBytes(t *testing.T) {
	js := testJS(t)
	path := filepath.Join(t.TempDir(), "raw.log")
	content := "crlf\r\n\n\xff\xfe invalid utf8\n\x00nul\ttab\n  \n\r\nlast without newline"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := NewFile(Config{Tenant: "raw"}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	runLines(t, l)
	got := walLines(t, js, streams.LineSubject("raw"))
	want := strings.Split(content, "\n")
	equalLines(t, got, want)
	if p := position(t, js, l.Source()); p != uint64(len(content)) {
		t.Fatalf("position %d, want %d", p, len(content))
	}
	// Reading again from the saved position writes nothing.
	l2, _ := NewFile(Config{Tenant: "raw"}, Deps{JS: js}, path)
	runLines(t, l2)
	equalLines(t, walLines(t, js, streams.LineSubject("raw")), want)
}

func TestEveryLineOnceInOrder(t *testing.T) {
	js := testJS(t)
	path := filepath.Join(t.TempDir(), "app.log")
	want := numbered(0, 20000)
	writeFile(t, path, want, false)
	l, err := NewFile(Config{Tenant: "acme", FrameMaxRecords: 300, Publisher: PublisherConfig{MaxInFlight: 8}}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	runLines(t, l)
	equalLines(t, walLines(t, js, streams.LineSubject("acme")), want)
	st := l.Stats()
	if st.Lines != 20000 || st.LastSeq == 0 || l.AckLatencies().Count() != st.Frames {
		t.Fatalf("stats %+v, latencies %d", st, l.AckLatencies().Count())
	}
	// Progress fact at the end.
	kv, _ := js.KeyValue(context.Background(), streams.ProgressBucket)
	e, err := kv.Get(context.Background(), l.Source())
	if err != nil {
		t.Fatal(err)
	}
	p, err := streams.DecodeProgress(e.Value())
	if err != nil || p.Rows != 20000 || p.Kind != "lines" || p.Tenant != "acme" || p.Offset != st.Position || p.FinalizedUntil.IsZero() {
		t.Fatalf("progress %+v, %v", p, err)
	}
}

// A source killed after its frames were acked but before it saved its
// position restarts, finds its frames in the WAL, and writes no line
// twice, even when it cuts its frames differently on the second run
// (JetStream's id de-duplication alone would not cover that).
func TestRestartAfterPublishBeforeSave(t *testing.T) {
	js := testJS(t)
	path := filepath.Join(t.TempDir(), "app.log")
	first := numbered(0, 1000)
	writeFile(t, path, first, false)
	l, err := NewFile(Config{Tenant: "acme", FrameMaxRecords: 70, Linger: time.Hour}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	l.hookNoSave = true
	runLines(t, l)
	kv, _ := js.KeyValue(context.Background(), streams.PositionsBucket)
	if _, err := kv.Get(context.Background(), PositionKey(l.Source())); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("hook did not prevent the save: %v", err)
	}
	more := numbered(1000, 500)
	writeFile(t, path, more, true)
	l2, err := NewFile(Config{Tenant: "acme", FrameMaxRecords: 33, Linger: time.Hour}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	runLines(t, l2)
	equalLines(t, walLines(t, js, streams.LineSubject("acme")), append(first, more...))
	if st := l2.Stats(); st.Recovered != 1000 || st.Lines != 500 {
		t.Fatalf("restart stats %+v", st)
	}
}

// Cancelling mid-run drains and saves; a restart continues without loss or
// duplicates.
func TestRestartAfterCancel(t *testing.T) {
	js := testJS(t)
	path := filepath.Join(t.TempDir(), "app.log")
	want := numbered(0, 30000)
	writeFile(t, path, want, false)
	total := uint64(len(strings.Join(want, "\n")) + 1)
	for run := 0; run < 3; run++ {
		// The cancel lands while a frame is held unpublished and most of
		// the file is unread, by construction: the run's 41st frame (of
		// some 500) is held until then.
		h := newHeldJS(js, 40+run)
		l, err := NewFile(Config{Tenant: "acme", FrameMaxRecords: 50 + run*7}, Deps{JS: h}, path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		<-h.held
		cancel()
		close(h.release)
		if err := <-done; err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if p := l.Stats().Position; p == total || p != position(t, js, l.Source()) {
			t.Fatalf("run %d: position %d, saved %d, total %d", run, p, position(t, js, l.Source()), total)
		}
	}
	l, _ := NewFile(Config{Tenant: "acme"}, Deps{JS: js}, path)
	runLines(t, l)
	equalLines(t, walLines(t, js, streams.LineSubject("acme")), want)
}

// heldJS publishes its first allow frames, then holds the next publish
// (held is closed) until release is closed: a cancel made while it holds
// lands mid-stream by construction.
type heldJS struct {
	jetstream.JetStream
	allow   atomic.Int32
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func newHeldJS(js jetstream.JetStream, allow int) *heldJS {
	h := &heldJS{JetStream: js, held: make(chan struct{}), release: make(chan struct{})}
	h.allow.Store(int32(allow))
	return h
}

func (h *heldJS) hold() {
	if h.allow.Add(-1) >= 0 {
		return
	}
	h.once.Do(func() { close(h.held) })
	<-h.release
}

func (h *heldJS) PublishMsgAsync(msg *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	h.hold()
	return h.JetStream.PublishMsgAsync(msg, opts...)
}

func (h *heldJS) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	h.hold()
	return h.JetStream.PublishMsg(ctx, msg, opts...)
}

func TestOversizedLineDeadLettered(t *testing.T) {
	js := testJS(t)
	path := filepath.Join(t.TempDir(), "big.log")
	big := strings.Repeat("0123456789", 20000) // 200000 bytes
	content := "before\n" + big + "\nafter\n" + big
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := NewFile(Config{Tenant: "big", MaxRecordBytes: 100000}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	runLines(t, l)
	equalLines(t, walLines(t, js, streams.LineSubject("big")), []string{"before", "after"})
	if st := l.Stats(); st.DeadLetters != 2 || st.Position != uint64(len(content)) {
		t.Fatalf("stats %+v", st)
	}
	st, _ := js.Stream(context.Background(), streams.DeadLetterStream)
	for i, wantOff := range []int{7, 7 + len(big) + 1 + 6} {
		m, err := st.GetMsg(context.Background(), uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != streams.DeadLetterSubject("producer") || m.Header.Get(streams.HeaderSource) != l.Source() ||
			m.Header.Get(streams.HeaderOffset) != strconv.Itoa(wantOff) || len(m.Data) != 64<<10 || !bytes.HasPrefix([]byte(big), m.Data) {
			t.Fatalf("dead letter %d: subject %s headers %v, %d bytes", i, m.Subject, m.Header, len(m.Data))
		}
		if r := m.Header.Get(streams.HeaderReason); !strings.Contains(r, "200000 bytes") {
			t.Fatalf("reason %q does not give the length", r)
		}
	}
}

func TestFollow(t *testing.T) {
	js := testJS(t)
	path := filepath.Join(t.TempDir(), "follow.log")
	writeFile(t, path, numbered(0, 10), false)
	l, err := NewFile(Config{Tenant: "follow", Follow: true, PollInterval: 5 * time.Millisecond, Linger: 5 * time.Millisecond}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	subj := streams.LineSubject("follow")
	waitFor(t, func() bool { return len(walLines(t, js, subj)) == 10 })
	writeFile(t, path, numbered(10, 5), true)
	// A partial line is held until its newline arrives.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("partial")
	waitFor(t, func() bool { return len(walLines(t, js, subj)) == 15 })
	time.Sleep(50 * time.Millisecond)
	if n := len(walLines(t, js, subj)); n != 15 {
		t.Fatalf("partial line published early: %d lines", n)
	}
	f.WriteString(" now complete\n")
	f.Close()
	waitFor(t, func() bool { return len(walLines(t, js, subj)) == 16 })
	// Truncation: restart at byte 0 with offsets continuing. Where they
	// continue from is the end of what the WAL holds: the source's
	// Stats().Position may lag the frame that is already visible (it read
	// 445 where the frame of "partial now complete" ended at 466).
	frames := walFrames(t, js, subj)
	posBefore := frames[len(frames)-1].NextOffset
	writeFile(t, path, []string{"after truncation"}, false)
	waitFor(t, func() bool { return len(walLines(t, js, subj)) == 17 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := append(numbered(0, 15), "partial now complete", "after truncation")
	equalLines(t, walLines(t, js, subj), want)
	frames = walFrames(t, js, subj)
	if last := frames[len(frames)-1]; last.FirstOffset != posBefore || last.NextOffset != posBefore+17 {
		t.Fatalf("frame after truncation [%d,%d), want [%d,%d)", last.FirstOffset, last.NextOffset, posBefore, posBefore+17)
	}
	// A restart resumes after the truncation point.
	writeFile(t, path, []string{"one more"}, true)
	l2, _ := NewFile(Config{Tenant: "follow"}, Deps{JS: js}, path)
	runLines(t, l2)
	equalLines(t, walLines(t, js, subj), append(want, "one more"))
}

func TestSubjectSource(t *testing.T) {
	js := testJS(t)
	nc := js.Conn()
	run := func(msgs []string) *Lines {
		l, err := NewSubject(Config{Tenant: "apps", Linger: 5 * time.Millisecond}, Deps{JS: js})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		waitFor(t, func() bool {
			select {
			case err := <-done:
				t.Fatalf("run: %v", err)
			default:
			}
			return l.Ready() == nil
		})
		for _, m := range msgs {
			if err := nc.Publish(IngestSubject("apps"), []byte(m)); err != nil {
				t.Fatal(err)
			}
		}
		nc.Flush()
		start := l.Stats().Lines
		waitFor(t, func() bool { return l.Stats().Lines >= start+uint64(len(msgs)) })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := run([]string{"a\nb\n", "c", "", "d\n\ne"})
	want := []string{"a", "b", "c", "", "d", "", "e"}
	equalLines(t, walLines(t, js, streams.LineSubject("apps")), want)
	if l.Source() != "nats-apps" || position(t, js, "nats-apps") != 7 {
		t.Fatalf("source %s position %d", l.Source(), position(t, js, "nats-apps"))
	}
	run([]string{"x"})
	frames := walFrames(t, js, streams.LineSubject("apps"))
	if last := frames[len(frames)-1]; last.FirstOffset != 7 || last.Records[0].Text != "x" {
		t.Fatalf("second run frame %+v", last)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := Config{
		Tenant: "a b", Source: "x/y", FrameMaxBytes: 10, FrameMaxRecords: -1, Linger: -time.Second,
		MaxRecordBytes: 100 << 20, PollInterval: -1, DrainTimeout: -1, ProgressInterval: -1, Rate: -5, StartTimeout: -1,
		Publisher: PublisherConfig{MaxInFlight: -1, AckTimeout: time.Microsecond, MaxAttempts: -1, RetryBackoff: -1},
	}.Defaults()
	err := bad.Validate()
	if err == nil {
		t.Fatal("bad config validated")
	}
	for _, want := range []string{"tenant", "source", "frame_max_bytes", "frame_max_records", "linger", "max_record_bytes",
		"poll_interval", "drain_timeout", "progress_interval", "rate", "start_timeout", "max_in_flight", "ack_timeout", "max_attempts", "retry_backoff"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
	if err := (Config{Tenant: "ok"}).Defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if _, err := NewFile(Config{}, Deps{}, "x"); err == nil {
		t.Fatal("NewFile without tenant and JS")
	}
}

// A frame the WAL refuses (larger than the stream's max message size) fails
// the source after its retries; the position stays before it.
func TestPublishFailureStopsSource(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{MaxMsgSize: 64 << 10})
	path := filepath.Join(t.TempDir(), "f.log")
	small := numbered(0, 10)
	big := make([]string, 10)
	for i := range big {
		big[i] = strings.Repeat("y", 10<<10)
	}
	writeFile(t, path, append(small, big...), false)
	l, err := NewFile(Config{Tenant: "fail", FrameMaxRecords: 10, Linger: time.Hour,
		Publisher: PublisherConfig{MaxAttempts: 2, RetryBackoff: time.Millisecond}}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	err = l.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "exceeds maximum") {
		t.Fatalf("run: %v", err)
	}
	if l.Ready() == nil {
		t.Fatal("ready after failure")
	}
	if p := position(t, js, l.Source()); p != uint64(len(strings.Join(small, "\n"))+1) {
		t.Fatalf("position %d after a failed frame", p)
	}
	equalLines(t, walLines(t, js, streams.LineSubject("fail")), small)
}

// Frames of the source already in the WAL beyond the saved position, with
// gaps between them (frames lost in flight), are skipped on restart and the
// gaps are filled: every line ends up in the WAL exactly once.
func TestRecoverWithGaps(t *testing.T) {
	js := testJS(t)
	path := filepath.Join(t.TempDir(), "gaps.log")
	lines := numbered(0, 100)
	writeFile(t, path, lines, false)
	offs := make([]uint64, len(lines)+1) // offs[i] = offset of line i
	for i, l := range lines {
		offs[i+1] = offs[i] + uint64(len(l)) + 1
	}
	const source = "gaps"
	p := NewPublisher(js, PublisherConfig{}, nil, nil)
	for _, r := range [][2]int{{20, 40}, {40, 45}, {60, 70}, {99, 100}} {
		f := &streams.Frame{Source: source, Tenant: "gaps", FirstOffset: offs[r[0]], NextOffset: offs[r[1]]}
		for i := r[0]; i < r[1]; i++ {
			f.Records = append(f.Records, streams.Record{Text: lines[i]})
		}
		if err := p.Publish(context.Background(), streams.LineSubject("gaps"), streams.FrameMsgID(source, f.FirstOffset), f, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	kv, _ := js.KeyValue(context.Background(), streams.PositionsBucket)
	if _, err := kv.Put(context.Background(), PositionKey(source), []byte(strconv.FormatUint(offs[10], 10))); err != nil {
		t.Fatal(err)
	}
	// Frames of another source on the same subject are not ours.
	other := &streams.Frame{Source: "gapsx", Tenant: "gaps", FirstOffset: offs[10], NextOffset: offs[11], Records: []streams.Record{{Text: "other"}}}
	if err := p.Publish(context.Background(), streams.LineSubject("gaps"), streams.FrameMsgID("gapsx", offs[10]), other, nil); err != nil {
		t.Fatal(err)
	}
	p.Flush(context.Background())

	l, err := NewFile(Config{Tenant: "gaps", Source: source, FrameMaxRecords: 7}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	runLines(t, l)
	count := map[string]int{}
	for _, f := range walFrames(t, js, streams.LineSubject("gaps")) {
		if f.Source != source {
			continue
		}
		for _, r := range f.Records {
			count[r.Text]++
		}
	}
	for i, line := range lines {
		want := 1
		if i < 10 {
			want = 0 // below the saved position: written by an earlier run
		}
		if count[line] != want {
			t.Fatalf("line %d in the WAL %d times, want %d", i, count[line], want)
		}
	}
	if st := l.Stats(); st.Recovered != 36 || st.Lines != 54 || st.Position != offs[100] {
		t.Fatalf("stats %+v", st)
	}
}

func TestCoveredAfter(t *testing.T) {
	for _, tc := range []struct {
		spans []span
		pos   uint64
		want  string
		hi    uint64
	}{
		{nil, 0, "[]", 0},
		{[]span{{0, 10}, {10, 20}}, 10, "[{10 20}]", 20},
		{[]span{{30, 40}, {10, 20}, {20, 25}, {5, 8}}, 10, "[{10 25} {30 40}]", 40},
		{[]span{{5, 15}}, 10, "[{10 15}]", 15},
		{[]span{{12, 12}}, 10, "[]", 0},
	} {
		got, hi := coveredAfter(tc.spans, tc.pos)
		if fmt.Sprint(got) != tc.want && !(len(got) == 0 && tc.want == "[]") || hi != tc.hi {
			t.Errorf("coveredAfter(%v, %d) = %v, %d; want %s, %d", tc.spans, tc.pos, got, hi, tc.want, tc.hi)
		}
	}
}

// Rename rotation: the old file is read to its end, then the new file at
// the path from byte 0, with offsets continuing.
func TestFollowRotation(t *testing.T) {
	js := testJS(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "app.log")
	writeFile(t, path, []string{"a1", "a2"}, false)
	l, err := NewFile(Config{Tenant: "rot", Follow: true, PollInterval: 5 * time.Millisecond, Linger: 5 * time.Millisecond}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	subj := streams.LineSubject("rot")
	waitFor(t, func() bool { return len(walLines(t, js, subj)) == 2 })
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path+".1", []string{"a3 written after the rename"}, true)
	waitFor(t, func() bool { return len(walLines(t, js, subj)) == 3 })
	writeFile(t, path, []string{"b1 in a longer new file than the old one was", "b2", "b3"}, false)
	waitFor(t, func() bool { return len(walLines(t, js, subj)) == 6 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	equalLines(t, walLines(t, js, subj), []string{"a1", "a2", "a3 written after the rename", "b1 in a longer new file than the old one was", "b2", "b3"})
}

// TestWALFloor: a source publishes its WAL floor before its first frame and
// keeps it at or below every frame its saved position does not cover, so the
// committer's WAL purge never removes frames a restart must read back.
func TestWALFloor(t *testing.T) {
	js := testJS(t)
	ctx := context.Background()
	// Someone else's frames first: the floor must start above them.
	for i := 0; i < 5; i++ {
		if _, err := js.Publish(ctx, streams.LineSubject("other"), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	kv, _ := js.KeyValue(ctx, streams.PositionsBucket)
	floorOf := func(source string) uint64 {
		e, err := kv.Get(ctx, streams.FloorKey(source))
		if err != nil {
			t.Fatalf("floor of %s: %v", source, err)
		}
		v, err := strconv.ParseUint(string(e.Value()), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	path := filepath.Join(t.TempDir(), "app.log")
	writeFile(t, path, numbered(0, 500), false)

	// A run whose position saves are all lost (a crash after publishing):
	// the floor published at start still protects every frame it wrote.
	l, err := NewFile(Config{Tenant: "acme", FrameMaxRecords: 50, Linger: time.Hour}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	l.hookNoSave = true
	runLines(t, l)
	if f := floorOf(l.Source()); f != 6 {
		t.Fatalf("floor after a run whose saves were lost = %d, want 6 (above the 5 foreign messages, at its first frame)", f)
	}

	// A restart that finds every frame in the WAL and crashes again before
	// saving a position: its frames are still needed, so the floor it
	// publishes on start must not move past them.
	lr, err := NewFile(Config{Tenant: "acme", FrameMaxRecords: 50, Linger: time.Hour}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	lr.hookNoSave = true
	runLines(t, lr)
	if lr.Stats().Recovered != 500 {
		t.Fatalf("restart recovered %d lines, want 500", lr.Stats().Recovered)
	}
	if f := floorOf(lr.Source()); f != 6 {
		t.Fatalf("floor after a restart that recovered its frames = %d, want 6 (they are still beyond the saved position)", f)
	}

	// A clean run: everything is covered by the saved position, so the
	// floor is released and holds no purge back.
	l2, err := NewFile(Config{Tenant: "acme", FrameMaxRecords: 50, Linger: time.Hour}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	runLines(t, l2)
	if e, err := kv.Get(ctx, streams.FloorKey(l2.Source())); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("floor after a clean run: %v %v, want it released", e, err)
	}
}

// A restart after a crash whose floor the WAL was purged past (the producer
// stayed down longer than the committer's floor_max_age) cannot find the
// frames it published beyond its saved position: it says so in a warning
// and a metric, and writes the lines again rather than lose them. A restart
// whose floor is intact, or after a clean stop, does not warn.
func TestRestartPastPurgedFloorWarns(t *testing.T) {
	js := testJS(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.log")
	writeFile(t, path, numbered(0, 300), false)
	run := func(noSave bool) (*Lines, string, float64) {
		var logs bytes.Buffer
		reg := prometheus.NewRegistry()
		l, err := NewFile(Config{Tenant: "acme", FrameMaxRecords: 50, Linger: time.Hour},
			Deps{JS: js, Log: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: reg}, path)
		if err != nil {
			t.Fatal(err)
		}
		l.hookNoSave = noSave
		runLines(t, l)
		return l, logs.String(), testutil.ToFloat64(l.m.unverified)
	}
	const warning = "wal purged past this source's floor"
	// A crash after publishing: nothing saved, the floor stays at 1.
	if _, logs, n := run(true); strings.Contains(logs, warning) || n != 0 {
		t.Fatalf("first run warned (%v):\n%s", n, logs)
	}
	// The frames are still in the WAL: the restart finds and skips them.
	wal, err := js.Stream(ctx, streams.WALStream)
	if err != nil {
		t.Fatal(err)
	}
	l, logs, n := run(true)
	if strings.Contains(logs, warning) || n != 0 || l.Stats().Recovered != 300 {
		t.Fatalf("restart with its frames in the WAL: warned %v, recovered %d:\n%s", n, l.Stats().Recovered, logs)
	}
	// Purge the WAL past the floor, as a committer does once the floor is
	// older than floor_max_age: the next restart cannot verify.
	info, err := wal.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := wal.Purge(ctx, jetstream.WithPurgeSequence(info.State.LastSeq+1)); err != nil {
		t.Fatal(err)
	}
	l, logs, n = run(false)
	if !strings.Contains(logs, warning) || n != 1 {
		t.Fatalf("restart past a purged floor: metric %v, logs:\n%s", n, logs)
	}
	if l.Stats().Lines != 300 {
		t.Fatalf("restart past a purged floor wrote %d lines, want all 300 again (never lost)", l.Stats().Lines)
	}
	// That run stopped cleanly: no floor, no warning next time.
	if _, logs, n := run(false); strings.Contains(logs, warning) || n != 0 {
		t.Fatalf("restart after a clean stop warned (%v):\n%s", n, logs)
	}
}

func TestPacerSchedule(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := &pacer{rate: 100} // one line every 10ms
	for _, step := range []struct {
		at   time.Duration // since t0
		want time.Duration
	}{
		{0, 10 * time.Millisecond},                     // line 1 read at once: due at 10ms
		{10 * time.Millisecond, 10 * time.Millisecond}, // line 2 on time
		{25 * time.Millisecond, 5 * time.Millisecond},  // line 3 late for 30ms: wait what is left
		{29 * time.Millisecond, 11 * time.Millisecond}, // line 4 due at 40ms
		{95 * time.Millisecond, 0},                     // line 5 far behind: no wait
		{95 * time.Millisecond, 0},                     // line 6 due at 60ms: still behind
		{69 * time.Millisecond, 0},                     // line 7 due at 70ms: 1ms is under minPause
	} {
		if got := p.delay(t0.Add(step.at)); got != step.want {
			t.Fatalf("line %v at %s: delay %s, want %s", p.n, step.at, got, step.want)
		}
	}
	if (Config{Tenant: "a", Rate: math.NaN()}).Defaults().Validate() == nil {
		t.Fatal("NaN rate validated")
	}
}

// A paced file source takes at least lines/rate seconds, frames as it goes
// (Linger, not only size) and still writes every line once, in order.
func TestRatePacesSource(t *testing.T) {
	js := testJS(t)
	path := filepath.Join(t.TempDir(), "paced.log")
	want := numbered(0, 100)
	writeFile(t, path, want, false)
	l, err := NewFile(Config{Tenant: "paced", Rate: 200, Linger: 20 * time.Millisecond}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runLines(t, l)
	if took := time.Since(start); took < 450*time.Millisecond {
		t.Fatalf("100 lines at 200/s took %s, want at least 0.45s", took)
	}
	equalLines(t, walLines(t, js, streams.LineSubject("paced")), want)
	if f := len(walFrames(t, js, streams.LineSubject("paced"))); f < 3 {
		t.Fatalf("%d frames: a paced source must frame by linger as it reads", f)
	}
}

// startSubject runs an ingest-subject source until the test ends and
// returns it once it is ready.
func startSubject(t *testing.T, js jetstream.JetStream, cfg Config) (*Lines, func() error) {
	t.Helper()
	l, err := NewSubject(cfg, Deps{JS: js})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	stopped := false
	var runErr error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() { stop() })
	waitFor(t, func() bool {
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("run: %v", err)
		default:
		}
		return l.Ready() == nil
	})
	return l, stop
}

// A request on the ingest subject is answered only once its lines are in
// the WAL: right after the answer, without waiting, the WAL holds them.
// Concurrent requests are all answered, each with its own offsets.
func TestSubjectRequestAnsweredWhenDurable(t *testing.T) {
	js := testJS(t)
	nc := js.Conn()
	_, stop := startSubject(t, js, Config{Tenant: "req", Linger: 20 * time.Millisecond, MaxRecordBytes: 100})
	subj := streams.LineSubject("req")

	m, err := nc.Request(IngestSubject("req"), []byte("alpha\nbeta\n"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var got Ingested
	if err := json.Unmarshal(m.Data, &got); err != nil || m.Header.Get(HeaderIngestError) != "" {
		t.Fatalf("answer %q %v: %v", m.Data, m.Header, err)
	}
	if got != (Ingested{Source: "nats-req", FirstOffset: 0, NextOffset: 2}) {
		t.Fatalf("answer %+v", got)
	}
	equalLines(t, walLines(t, js, subj), []string{"alpha", "beta"})

	// Concurrent requesters, and one whose only line is too long: it is
	// answered once the line is in the dead-letter stream.
	const n = 40
	answers := make(chan Ingested, n)
	errs := make(chan error, n+1)
	for i := range n {
		go func() {
			m, err := nc.Request(IngestSubject("req"), fmt.Appendf(nil, "c%d-1\nc%d-2", i, i), 10*time.Second)
			if err != nil {
				errs <- err
				return
			}
			var a Ingested
			if err := json.Unmarshal(m.Data, &a); err != nil {
				errs <- fmt.Errorf("answer %q: %w", m.Data, err)
				return
			}
			answers <- a
		}()
	}
	long, err := nc.Request(IngestSubject("req"), bytes.Repeat([]byte("z"), 500), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if long.Header.Get(HeaderIngestError) != "" {
		t.Fatalf("dead-lettered line answered with an error: %v", long.Header)
	}
	if n := dlqCount(t, js); n != 1 {
		t.Fatalf("dead-letter stream holds %d messages right after the answer, want 1", n)
	}
	seen := map[uint64]bool{}
	for range n {
		select {
		case a := <-answers:
			if a.NextOffset != a.FirstOffset+2 || seen[a.FirstOffset] {
				t.Fatalf("answer %+v (seen %v)", a, seen)
			}
			seen[a.FirstOffset] = true
		case err := <-errs:
			t.Fatal(err)
		}
	}
	wal := walLines(t, js, subj)
	if len(wal) != 2+2*n {
		t.Fatalf("WAL holds %d lines after %d answers, want %d", len(wal), n+1, 2+2*n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A source that cannot write a request's lines answers with an error
// instead of leaving the requester to time out.
func TestSubjectRequestAnsweredWithError(t *testing.T) {
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s.URL(), streams.Config{MaxMsgSize: 8 << 10})
	_, stop := startSubject(t, js, Config{Tenant: "refused", Linger: time.Millisecond,
		Publisher: PublisherConfig{MaxAttempts: 2, RetryBackoff: time.Millisecond}})
	m, err := nc.Request(IngestSubject("refused"), bytes.Repeat([]byte("y"), 20<<10), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if e := m.Header.Get(HeaderIngestError); !strings.Contains(e, "exceeds maximum") || len(m.Data) != 0 {
		t.Fatalf("answer %q with error header %q, want the WAL's refusal", m.Data, e)
	}
	if err := stop(); err == nil {
		t.Fatal("source went on after a refused frame")
	}
}

func dlqCount(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	_, info := streamInfo(t, js, streams.DeadLetterStream)
	return info.State.Msgs
}

// streamInfo looks up stream name and its current state.
func streamInfo(t testing.TB, js jetstream.JetStream, name string) (jetstream.Stream, *jetstream.StreamInfo) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st, info
}

// A followed file that goes quiet releases its WAL floor once everything
// it published is covered by its saved position, so it does not hold the
// committer's WAL purge for ever. New lines put the floor back before
// their first frame is published, at or below that frame's sequence, and
// it is released again only after they are covered.
func TestFloorReleasedWhileIdle(t *testing.T) {
	js := testJS(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "quiet.log")
	writeFile(t, path, numbered(0, 100), false)
	l, err := NewFile(Config{Tenant: "quiet", Follow: true, PollInterval: 5 * time.Millisecond,
		Linger: 5 * time.Millisecond, FrameMaxRecords: 30, ProgressInterval: 20 * time.Millisecond}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	released := floortest.Released(t, js, l.Source())
	waitFor(t, func() bool { return l.Stats().Lines == 100 && released() })

	w := floortest.Watch(t, js, l.Source())
	subj := streams.LineSubject("quiet")
	before := len(walFrames(t, js, subj))
	writeFile(t, path, numbered(100, 100), true)
	events := floortest.EventsUntilReleased(t, js, l.Source(), w, func() bool { return l.Stats().Lines == 200 })
	floortest.CheckCovered(t, js, subj, before, events)
}

// TestFloorReleasedAfterRecoveredFrames: a followed file restarted after a
// crash that lost its position saves finds its frames in the WAL and skips
// them; with no new line to publish, its position still passes them, so it
// saves it and releases its WAL floor instead of holding the purge back.
func TestFloorReleasedAfterRecoveredFrames(t *testing.T) {
	js := testJS(t)
	path := filepath.Join(t.TempDir(), "quiet.log")
	writeFile(t, path, numbered(0, 100), false)
	cfg := Config{Tenant: "quiet", Follow: true, PollInterval: 5 * time.Millisecond,
		Linger: 5 * time.Millisecond, FrameMaxRecords: 30, ProgressInterval: 20 * time.Millisecond}
	crashed, err := NewFile(Config{Tenant: "quiet", FrameMaxRecords: 30, Linger: time.Hour}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	crashed.hookNoSave = true // every position save of this run is lost
	runLines(t, crashed)
	released := floortest.Released(t, js, crashed.Source())
	if released() {
		t.Fatal("the crashed run left no floor")
	}

	l, err := NewFile(cfg, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, func() bool { return l.Stats().Recovered == 100 && released() })
	if n := len(walFrames(t, js, streams.LineSubject("quiet"))); n != 4 {
		t.Fatalf("%d frames in the WAL, want the crashed run's 4 only", n)
	}
}

// unavailableJS answers KeyValue with JetStream's "temporarily
// unavailable" (a cluster electing leaders) for its first n calls.
type unavailableJS struct {
	jetstream.JetStream
	n     atomic.Int32
	calls atomic.Int32
}

func (u *unavailableJS) KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	u.calls.Add(1)
	if u.n.Add(-1) >= 0 {
		return nil, &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	}
	return u.JetStream.KeyValue(ctx, bucket)
}

// A source started while JetStream is unavailable retries, says why in
// Ready, and goes on once it answers; a source whose saved position is
// corrupt fails at once, and one that never gets an answer fails after
// StartTimeout.
func TestStartRetriesUnavailableJetStream(t *testing.T) {
	js := testJS(t)
	path := filepath.Join(t.TempDir(), "app.log")
	writeFile(t, path, numbered(0, 50), false)

	ujs := &unavailableJS{JetStream: js}
	ujs.n.Store(3)
	l, err := NewFile(Config{Tenant: "late"}, Deps{JS: ujs}, path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run(context.Background()) }()
	sawRetry := false
	for !sawRetry {
		select {
		case err := <-done:
			t.Fatalf("run ended before a retry was visible in Ready: %v", err)
		default:
		}
		if err := l.Ready(); err != nil && strings.Contains(err.Error(), "temporarily unavailable") {
			sawRetry = true
		}
		time.Sleep(time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatalf("run after JetStream came back: %v", err)
	}
	equalLines(t, walLines(t, js, streams.LineSubject("late")), numbered(0, 50))

	never := &unavailableJS{JetStream: js}
	never.n.Store(1 << 30)
	l2, err := NewFile(Config{Tenant: "never", StartTimeout: 300 * time.Millisecond}, Deps{JS: never}, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "temporarily unavailable") || never.calls.Load() < 2 {
		t.Fatalf("run against a JetStream that never answers: %v after %d calls", err, never.calls.Load())
	}

	kv, err := js.KeyValue(context.Background(), streams.PositionsBucket)
	if err != nil {
		t.Fatal(err)
	}
	l3, err := NewFile(Config{Tenant: "corrupt"}, Deps{JS: js}, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), PositionKey(l3.Source()), []byte("not a number")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := l3.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "is not an offset") {
		t.Fatalf("run with a corrupt position: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("a corrupt position was retried for %s", took)
	}
}
