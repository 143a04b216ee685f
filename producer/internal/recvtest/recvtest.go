// Package recvtest starts an ingest hub on an embedded JetStream server and
// reads back what the receivers wrote: the receivers' tests share it.
package recvtest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/ingest"
	"github.com/quarrylake/quarry/streams"
)

// Hub runs a hub for cfg (Linger 5ms unless set) on a fresh embedded
// server until the test ends, and returns it once its default tenant's
// source is ready.
func Hub(t testing.TB, cfg producer.Config, tokens map[string]string) (*ingest.Hub, jetstream.JetStream) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	return HubOn(t, js, cfg, tokens), js
}

// HubOn is Hub on an existing connection.
func HubOn(t testing.TB, js jetstream.JetStream, cfg producer.Config, tokens map[string]string) *ingest.Hub {
	t.Helper()
	return HubWith(t, cfg, ingest.Deps{JS: js, Tokens: tokens})
}

// HubWith is Hub with deps (deps.JS the connection).
func HubWith(t testing.TB, cfg producer.Config, deps ingest.Deps) *ingest.Hub {
	t.Helper()
	if cfg.Tenant == "" {
		cfg.Tenant = "default"
	}
	if cfg.Linger == 0 {
		cfg.Linger = 5 * time.Millisecond
	}
	h, err := ingest.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hub run: %v", err)
		}
	})
	Wait(t, 30*time.Second, func() bool { return h.Ready() == nil })
	return h
}

// Wait polls cond until it holds or d passes (then the test fails).
func Wait(t testing.TB, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Records are every record in the WAL for tenant, in WAL order.
func Records(t testing.TB, js jetstream.JetStream, tenant string) []streams.Record {
	t.Helper()
	var out []streams.Record
	for _, m := range messages(t, js, streams.WALStream) {
		if m.Subject() != streams.LineSubject(tenant) {
			continue
		}
		f, err := streams.DecodeFrame(m.Data())
		if err != nil {
			t.Fatalf("wal message on %s: %v", m.Subject(), err)
		}
		out = append(out, f.Records...)
	}
	return out
}

// Texts are the texts of Records.
func Texts(t testing.TB, js jetstream.JetStream, tenant string) []string {
	t.Helper()
	var out []string
	for _, r := range Records(t, js, tenant) {
		out = append(out, r.Text)
	}
	return out
}

// DeadLetter is one message of the dead-letter stream.
type DeadLetter struct {
	Payload, Reason string
}

// DeadLetters are the dead-letter stream's messages.
func DeadLetters(t testing.TB, js jetstream.JetStream) []DeadLetter {
	t.Helper()
	var out []DeadLetter
	for _, m := range messages(t, js, streams.DeadLetterStream) {
		out = append(out, DeadLetter{Payload: string(m.Data()), Reason: m.Headers().Get(streams.HeaderReason)})
	}
	return out
}

func messages(t testing.TB, js jetstream.JetStream, stream string) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	// An ordered consumer reads in batches: one request per message would
	// take long for a WAL of many small frames.
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for {
		b, err := c.FetchNoWait(1000)
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			out = append(out, m)
		}
		if b.Error() != nil {
			t.Fatal(b.Error())
		}
		if len(out) == 0 {
			if ctx.Err() != nil {
				t.Fatalf("stream %s: nothing fetched", stream)
			}
			continue
		}
		md, err := out[len(out)-1].Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if md.Sequence.Stream >= info.State.LastSeq {
			return out
		}
	}
}

// Attr is the value of key in r's attributes ("" when absent).
func Attr(r streams.Record, key string) string {
	for _, a := range r.Attrs {
		if a.Key == key {
			return a.Value
		}
	}
	return ""
}
