package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/internal/shippertest"
	"github.com/quarrylake/quarry/internal/syncbuf"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/httpin"
	"github.com/quarrylake/quarry/producer/ingest"
	"github.com/quarrylake/quarry/producer/internal/recvtest"
	"github.com/quarrylake/quarry/producer/syslog"
	"github.com/quarrylake/quarry/streams"
)

// A full WAL, for real: JetStream's file store is capped by its server
// config and filled (by another stream) once the receivers run and
// before they get lines. HTTP
// answers 503 with Retry-After within ack_timeout, and a syslog TCP
// connection stops being read (the sender's write stalls) instead of the
// receiver buffering. The WAL stays full long enough for the tenant's
// source to stop (its progress cannot be saved either); once room is made,
// the held syslog lines land through the source that replaces it, each
// exactly once, none dropped.
func TestWALFull(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte("jetstream {\n  max_file_store: 24MB\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := natsutil.StartServer(natsutil.ServerConfig{StoreDir: filepath.Join(dir, "store"), Port: -1, SyncAlways: true, ConfigFile: conf}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	_, js := natstest.Connect(t, srv.ClientURL(), streams.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logs syncbuf.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			os.WriteFile("/tmp/walfull.log", []byte(logs.String()), 0o644)
		}
	})
	hub := recvtest.HubWith(t, producer.Config{Tenant: "logs", Publisher: producer.PublisherConfig{MaxAttempts: 3, RetryBackoff: 50 * time.Millisecond}, Receivers: producer.ReceiversConfig{
		AckTimeout: 500 * time.Millisecond, MaxInFlightBytes: 1 << 20, MaxLineBytes: 1024}}, ingest.Deps{JS: js, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	hs, err := httpin.Listen("127.0.0.1:0", nil, hub)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := syslog.Listen(syslog.Config{Addr: "127.0.0.1:0"}, hub)
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { hs.Run(sctx); done <- struct{}{} }()
	go func() { ss.Run(sctx); done <- struct{}{} }()
	t.Cleanup(func() { scancel(); <-done; <-done })

	fill, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FILL", Subjects: []string{"fill.>"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 256<<10)
	full := false
	for i := 0; i < 200 && !full; i++ {
		_, err := js.Publish(ctx, "fill.x", chunk)
		full = err != nil
	}
	if !full {
		t.Fatal("the store did not fill up")
	}
	if info, err := fill.Info(ctx); err != nil || info.State.Bytes < 8<<20 {
		t.Fatalf("filler stream: %v, %v", info, err)
	}

	// HTTP: refused with 503 and Retry-After, not held.
	resp, err := (&http.Client{Timeout: time.Minute}).Post("http://"+hs.Addr().String()+"/jsonline?tenant=web", "application/x-ndjson",
		strings.NewReader(`{"message":"while full"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("HTTP while the WAL is full: %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	// Syslog: the sender stalls.
	tcp, _, _ := ss.Addrs()
	c, err := net.Dial("tcp", tcp.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 150000
	var all []byte
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("line %07d %s", i, strings.Repeat("p", 64))
		all = fmt.Appendf(all, "<13>1 - h a - - - %s\n", want[i])
	}
	c.SetWriteDeadline(time.Now().Add(3 * time.Second))
	w, err := c.Write(all)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("syslog write of %d bytes while the WAL is full: %d written, err %v; want a stalled write", len(all), w, err)
	}
	if held := hub.InFlight(); held > 1<<20+256<<10 {
		t.Fatalf("%d bytes in flight, above the bound", held)
	}
	// Until the source gives up on the full WAL and stops (its lines are
	// then handed over again, not dropped).
	recvtest.Wait(t, time.Minute, func() bool { return strings.Contains(logs.String(), "handing it over again") })

	// Room again: the held lines and the rest land, each once.
	if err := js.DeleteStream(ctx, "FILL"); err != nil {
		t.Fatal(err)
	}
	c.SetWriteDeadline(time.Time{})
	if _, err := c.Write(all[w:]); err != nil {
		t.Fatal(err)
	}
	c.Close()
	recvtest.Wait(t, 2*time.Minute, func() bool {
		for _, st := range hub.Stats() {
			if st.Source == "recv-logs" {
				return st.Lines >= n
			}
		}
		return false
	})
	shippertest.ExactlyOnce(t, recvtest.Texts(t, js, "logs"), want)
}
