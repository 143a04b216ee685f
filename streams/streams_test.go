package streams_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/streams"
)

func TestFrameRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		f    streams.Frame
	}{
		{"empty", streams.Frame{Source: "s", Tenant: "t"}},
		{"lines", streams.Frame{Source: "file-a", Tenant: "acme", FirstOffset: 10, NextOffset: 99, Records: []streams.Record{
			{TS: 1, Text: "hello world"}, {TS: -5, Text: "", Attrs: []streams.Attr{{"op", "insert"}, {"", ""}}},
			{TS: 1 << 62, Text: "\xff\x00bin\n"},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := streams.AppendFrame(nil, &tt.f)
			got, err := streams.DecodeFrame(b)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(*got, tt.f) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", *got, tt.f)
			}
		})
	}
}

func TestDecodeFrameRejects(t *testing.T) {
	good := streams.AppendFrame(nil, &streams.Frame{Source: "s", Tenant: "t", NextOffset: 3, Records: []streams.Record{{Text: "abc"}}})
	tests := []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"bad magic", append([]byte("XX"), good[2:]...)},
		{"bad version", append([]byte{'Q', 'F', 9}, good[3:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte{}, good...), 0)},
		{"bad tenant", streams.AppendFrame(nil, &streams.Frame{Source: "s", Tenant: "a.b"})},
		{"offsets backwards", streams.AppendFrame(nil, &streams.Frame{Source: "s", Tenant: "t", FirstOffset: 5, NextOffset: 4})},
		{"huge count", []byte{'Q', 'F', 1, 0, 1, 't', 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := streams.DecodeFrame(tt.b); !errors.Is(err, streams.ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}

func TestMinedBatchRoundTrip(t *testing.T) {
	m := streams.MinedBatch{
		WALSeq: 42, PrevSeq: 40, Tenant: "acme", Source: "gen", Subject: "quarry.wal.lines.acme",
		FirstOffset: 1, NextOffset: 9, Quarantined: 2,
		Records: []streams.MinedRecord{
			{Index: 0, TS: 7, TemplateID: 3, TemplateVersion: 2, Params: []string{"a", ""}, Attrs: []streams.Attr{{"k", "v"}}},
			{Index: 3, TS: 8, TemplateID: 4, TemplateVersion: 1},
		},
		Templates: []streams.TemplateDef{{Kind: streams.TemplateChanged, ID: 3, Tenant: "acme", Version: 2, Text: "x <*>", Previous: "x y"}},
	}
	got, err := streams.DecodeMinedBatch(streams.AppendMinedBatch(nil, &m))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !reflect.DeepEqual(*got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", *got, m)
	}
	bad := m
	bad.PrevSeq = 42
	if _, err := streams.DecodeMinedBatch(streams.AppendMinedBatch(nil, &bad)); !errors.Is(err, streams.ErrMalformed) {
		t.Fatalf("prev >= seq: got %v, want ErrMalformed", err)
	}
}

func TestCheckToken(t *testing.T) {
	for _, ok := range []string{"a", "acme-1", "A_b"} {
		if err := streams.CheckToken(ok); err != nil {
			t.Errorf("CheckToken(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a.b", "a b", "a*", ">", "é", string(make([]byte, 129))} {
		if err := streams.CheckToken(bad); !errors.Is(err, streams.ErrBadToken) {
			t.Errorf("CheckToken(%q) = %v, want ErrBadToken", bad, err)
		}
	}
	if got := streams.SanitizeToken("/var/log/a.log"); got != "_var_log_a_log" {
		t.Errorf("SanitizeToken = %q", got)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (streams.Config{}).Defaults().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	err := streams.Config{Replicas: 7, DuplicateWindow: 1, MaxMsgSize: 1, DeadLetterMaxAge: 1, VerdictTTL: 1, NoticeMaxAge: 1,
		NoticeMaxMsgs: 1, DeadLetterMaxBytes: 1}.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 8 {
		t.Fatalf("want every problem reported (8), got %d: %v", n, err)
	}
}

func TestEnsureCreatesAndChecks(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range (streams.Config{}).Defaults().StreamConfigs() {
		st, err := js.Stream(ctx, c.Name)
		if err != nil {
			t.Fatalf("stream %s: %v", c.Name, err)
		}
		if st.CachedInfo().Config.Retention != c.Retention {
			t.Fatalf("stream %s retention %v", c.Name, st.CachedInfo().Config.Retention)
		}
	}
	// Idempotent.
	if err := streams.Ensure(ctx, js, streams.Config{}.Defaults()); err != nil {
		t.Fatalf("second ensure: %v", err)
	}
	// A WAL created with memory storage is reported, not used.
	if err := js.DeleteStream(ctx, streams.WALStream); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streams.WALStream, Subjects: []string{streams.WALSubjects}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	err := streams.Ensure(ctx, js, streams.Config{}.Defaults())
	if !errors.Is(err, streams.ErrMismatch) {
		t.Fatalf("got %v, want ErrMismatch", err)
	}
}

// TestEnsureReportsEveryDifference: an existing stream whose settings
// differ from what quarry needs is reported with every difference named,
// and left unchanged.
func TestEnsureReportsEveryDifference(t *testing.T) {
	cases := []struct {
		name string
		cfg  jetstream.StreamConfig
		want []string
	}{
		{"memory storage", jetstream.StreamConfig{Storage: jetstream.MemoryStorage, Discard: jetstream.DiscardNew}, []string{"storage is Memory"}},
		{"discard old", jetstream.StreamConfig{Storage: jetstream.FileStorage, Discard: jetstream.DiscardOld}, []string{"discard policy is DiscardOld, want DiscardNew"}},
		{"deny purge and delete", jetstream.StreamConfig{Storage: jetstream.FileStorage, Discard: jetstream.DiscardNew, DenyPurge: true, DenyDelete: true}, []string{"deny_purge", "deny_delete"}},
		{"work queue", jetstream.StreamConfig{Storage: jetstream.FileStorage, Discard: jetstream.DiscardNew, Retention: jetstream.WorkQueuePolicy}, []string{"retention is WorkQueue"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := natstest.RunServer(t)
			_, js := natstest.Connect(t, s.URL(), streams.Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := js.DeleteStream(ctx, streams.WALStream); err != nil {
				t.Fatal(err)
			}
			cfg := tc.cfg
			cfg.Name, cfg.Subjects = streams.WALStream, []string{streams.WALSubjects}
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			err := streams.Ensure(ctx, js, streams.Config{}.Defaults())
			if !errors.Is(err, streams.ErrMismatch) {
				t.Fatalf("got %v, want ErrMismatch", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			st, err := js.Stream(ctx, streams.WALStream)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.CachedInfo().Config; got.Discard != cfg.Discard || got.DenyPurge != cfg.DenyPurge || got.Storage != cfg.Storage {
				t.Errorf("Ensure changed the mismatching stream: %+v", got)
			}
		})
	}
}

func TestDecodeTemplateEventKinds(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{`{"kind":"created","template_id":1,"tenant":"t","version":1,"template":"a"}`, true},
		{`{"kind":"changed","template_id":1,"tenant":"t","version":2,"template":"<*>","previous":"a"}`, true},
		{`{"kind":"merged","template_id":3,"tenant":"t","version":1,"template":"a <*>","previous":"a b","into":2}`, true},
		{`{"kind":"merged","template_id":3,"tenant":"t","version":1}`, false},
		{`{"kind":"merged","template_id":3,"into":3}`, false},
		{`{"kind":"deleted","template_id":3}`, false},
		{`not json`, false},
	}
	for _, tt := range tests {
		_, err := streams.DecodeTemplateEvent([]byte(tt.in))
		if (err == nil) != tt.ok {
			t.Errorf("DecodeTemplateEvent(%s) = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

// TestDecodeProgressVersions: a progress/2 fact carries its tenant; a
// progress/1 fact (no tenant field) still decodes, with no tenant.
func TestDecodeProgressVersions(t *testing.T) {
	p, err := streams.DecodeProgress([]byte(`{"source":"s","tenant":"acme","kind":"lines","rows":1,"frames":1,"finalized_until":"2026-11-30T11:00:00Z","updated_at":"2026-11-30T11:00:00Z"}`))
	if err != nil || p.Tenant != "acme" || p.Source != "s" {
		t.Fatalf("progress/2: %+v, %v", p, err)
	}
	p, err = streams.DecodeProgress([]byte(`{"source":"s","kind":"lines","rows":1,"frames":1,"finalized_until":"2026-11-30T11:00:00Z","updated_at":"2026-11-30T11:00:00Z"}`))
	if err != nil || p.Tenant != "" || p.FinalizedUntil.IsZero() {
		t.Fatalf("progress/1: %+v, %v", p, err)
	}
	if streams.FormatProgress != "progress/2" {
		t.Fatalf("FormatProgress %q", streams.FormatProgress)
	}
}

// The shared decoders give what the copying ones give, with the records'
// strings in the payload itself (a change to the payload shows through)
// and the template texts in their own memory.
func TestSharedDecode(t *testing.T) {
	f := streams.Frame{Source: "file-a", Tenant: "acme", NextOffset: 9, Records: []streams.Record{
		{TS: 1, Text: "hello world"}, {Text: "", Attrs: []streams.Attr{{"op", "insert"}}}}}
	b := streams.AppendFrame(nil, &f)
	got, err := streams.DecodeFrameShared(b)
	if err != nil || !reflect.DeepEqual(*got, f) {
		t.Fatalf("shared frame: %v\n got %+v\nwant %+v", err, got, f)
	}
	i := strings.Index(string(b), "hello")
	b[i] = 'j'
	if got.Records[0].Text != "jello world" {
		t.Fatalf("frame text %q does not alias the payload", got.Records[0].Text)
	}

	m := streams.MinedBatch{WALSeq: 42, PrevSeq: 40, Tenant: "acme", Source: "gen",
		Records: []streams.MinedRecord{
			{TemplateID: 3, TemplateVersion: 1, Params: []string{"alpha", ""}},
			{TemplateID: 3, TemplateVersion: 1, Params: []string{"beta"}},
		},
		Templates: []streams.TemplateDef{{Kind: streams.TemplateCreated, ID: 3, Tenant: "acme", Version: 1, Text: "tpl <*> <*>", Kinds: []string{"word", ""}}},
	}
	mb := streams.AppendMinedBatch(nil, &m)
	gm, err := streams.DecodeMinedBatchShared(mb)
	if err != nil || !reflect.DeepEqual(*gm, m) {
		t.Fatalf("shared batch: %v\n got %+v\nwant %+v", err, gm, m)
	}
	// A parameter slice is capped: appending to it leaves the next one.
	_ = append(gm.Records[0].Params, "x")
	if gm.Records[1].Params[0] != "beta" {
		t.Fatalf("appending to one record's params changed the next: %q", gm.Records[1].Params)
	}
	for _, s := range []string{"alpha", "tpl "} {
		mb[strings.Index(string(mb), s)] = '#'
	}
	if gm.Records[0].Params[0] != "#lpha" {
		t.Fatalf("param %q does not alias the payload", gm.Records[0].Params[0])
	}
	if gm.Templates[0].Text != "tpl <*> <*>" {
		t.Fatalf("template text %q changed with the payload", gm.Templates[0].Text)
	}
}

// TestNoticeAndDeadLetterCaps: the notice stream keeps at most
// notice_max_msgs notices, dropping the oldest, whatever the rate; the
// dead-letter stream at most dead_letter_max_bytes, refusing new dead
// letters at the cap and keeping every one it took.
func TestNoticeAndDeadLetterCaps(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{NoticeMaxMsgs: 1000, DeadLetterMaxBytes: 1 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 1500 {
		if _, err := js.Publish(ctx, streams.NoticeSubject("records"), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	dead := make([]byte, 8<<10)
	took, refused := 0, 0
	for range 300 { // 2.4 MiB
		if _, err := js.Publish(ctx, "quarry.dlq.committer", dead); err != nil {
			refused++
			continue
		}
		if refused > 0 {
			t.Fatal("a dead letter was taken after one was refused at the cap")
		}
		took++
	}
	if refused == 0 || took == 0 {
		t.Fatalf("dead letters: %d taken, %d refused; want the cap to refuse the rest", took, refused)
	}
	dst, err := js.Stream(ctx, streams.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	dinfo, err := dst.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if dinfo.State.FirstSeq != 1 || dinfo.State.Msgs != uint64(took) || dinfo.State.Bytes > 1<<20 {
		t.Errorf("dead letters: first %d, %d held (%d bytes), want all %d taken from the first, within 1 MiB", dinfo.State.FirstSeq, dinfo.State.Msgs, dinfo.State.Bytes, took)
	}
	for _, c := range []struct {
		stream     string
		msgs, size uint64
	}{{streams.NoticeStream, 1000, 0}} {
		st, err := js.Stream(ctx, c.stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.msgs > 0 && info.State.Msgs != c.msgs || c.size > 0 && (info.State.Bytes > c.size || info.State.Bytes < c.size/2) {
			t.Errorf("%s holds %d messages, %d bytes; want the cap (%d messages, %d bytes)", c.stream, info.State.Msgs, info.State.Bytes, c.msgs, c.size)
		}
		if info.State.FirstSeq == 1 {
			t.Errorf("%s kept its first message: nothing dropped", c.stream)
		}
	}
}

// TestDecodeAttrsAllocs: a shared decode of a frame whose records carry
// attributes (a syslog frame: host, app, severity) allocates about one
// slice per record; building an error label per attribute cost six
// strings a record and 6% of a syslog run's CPU.
func TestDecodeAttrsAllocs(t *testing.T) {
	const n = 200
	f := &streams.Frame{Source: "syslog", Tenant: "acme", NextOffset: n}
	for i := range n {
		f.Records = append(f.Records, streams.Record{TS: int64(i), Text: "sshd: accepted key for root",
			Attrs: []streams.Attr{{Key: "host", Value: "web-1"}, {Key: "app", Value: "sshd"}, {Key: "severity", Value: "info"}}})
	}
	b := streams.AppendFrame(nil, f)
	allocs := testing.AllocsPerRun(20, func() {
		got, err := streams.DecodeFrameShared(b)
		if err != nil || len(got.Records) != n || got.Records[n-1].Attrs[2].Value != "info" {
			t.Fatalf("decode: %v", err)
		}
	})
	if allocs > 1.5*n {
		t.Fatalf("%.0f allocations to decode %d records of 3 attributes", allocs, n)
	}
	t.Logf("%.0f allocations for %d records", allocs, n)
}
