package otlp_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/tlsgen"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/ingest"
	"github.com/quarrylake/quarry/producer/internal/recvtest"
	"github.com/quarrylake/quarry/producer/otlp"
	"github.com/quarrylake/quarry/streams"
)

// start serves cfg over hub until the test ends.
func start(t testing.TB, hub *ingest.Hub, cfg otlp.Config) *otlp.Server {
	t.Helper()
	s, err := otlp.Listen(cfg, hub)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("otlp run: %v", err)
		}
	})
	return s
}

func post(t *testing.T, url, ctype string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func request(texts ...string) *collogspb.ExportLogsServiceRequest {
	sl := &logspb.ScopeLogs{Scope: &commonpb.InstrumentationScope{Name: "s"}}
	for _, s := range texts {
		sl.LogRecords = append(sl.LogRecords, &logspb.LogRecord{Body: str(s), Attributes: []*commonpb.KeyValue{kv("k", str("v"))}})
	}
	return &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource:  &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", str("svc"))}},
		ScopeLogs: []*logspb.ScopeLogs{sl},
	}}}
}

func protoBody(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A record above a limit is dead-lettered as a one-record OTLP JSON
// request (which /v1/logs takes back) and counted in partial_success; the
// others are written, and the answer (200) comes once all are durable.
// The answer is in the request's encoding.
func TestPartialSuccess(t *testing.T) {
	hub, js := recvtest.Hub(t, producer.Config{Receivers: producer.ReceiversConfig{MaxLineBytes: 100}}, nil)
	s := start(t, hub, otlp.Config{HTTPAddr: "127.0.0.1:0"})
	h, _ := s.Addrs()
	url := "http://" + h.String() + "/v1/logs"
	long := strings.Repeat("x", 150)
	resp, b := post(t, url, "application/x-protobuf", protoBody(t, request("a", long, "b")), map[string]string{otlp.TenantHeader: "t1"})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("status %d, type %q: %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var er collogspb.ExportLogsServiceResponse
	if err := proto.Unmarshal(b, &er); err != nil {
		t.Fatal(err)
	}
	if er.GetPartialSuccess().GetRejectedLogRecords() != 1 || !strings.Contains(er.GetPartialSuccess().GetErrorMessage(), "max_line_bytes") {
		t.Fatalf("partial success %+v", er.GetPartialSuccess())
	}
	if got := recvtest.Texts(t, js, "t1"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("WAL %q", got)
	}
	dl := recvtest.DeadLetters(t, js)
	if len(dl) != 1 || !strings.Contains(dl[0].Reason, "max_line_bytes") {
		t.Fatalf("dead letters %+v", dl)
	}
	back, err := otlp.UnmarshalJSON([]byte(dl[0].Payload))
	if err != nil {
		t.Fatalf("dead letter does not decode as OTLP JSON: %v\n%s", err, dl[0].Payload)
	}
	if es := otlp.Entries(back); len(es) != 1 || es[0].Text != long || recvtest.Attr(streams.Record{Attrs: es[0].Attrs}, "resource.service.name") != "svc" {
		t.Fatalf("dead letter decodes to %+v", es)
	}
	// JSON in, JSON out; no rejection, no partial_success.
	resp, b = post(t, url, "application/json; charset=utf-8",
		[]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"c"},"spanId":"EEE19B7EC3C1B174"}]}]}]}`), map[string]string{otlp.TenantHeader: "t1"})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || strings.Contains(string(b), "partial") {
		t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	recs := recvtest.Records(t, js, "t1")
	if len(recs) != 3 || recs[2].Text != "c" || recvtest.Attr(recs[2], "span_id") != "eee19b7ec3c1b174" {
		t.Fatalf("WAL %+v", recs)
	}
}

// Requests that cannot be taken whole write nothing and say why, as a
// google.rpc.Status in the request's encoding.
func TestBadRequests(t *testing.T) {
	hub, js := recvtest.Hub(t, producer.Config{Receivers: producer.ReceiversConfig{MaxBodyBytes: 4096}}, nil)
	s := start(t, hub, otlp.Config{HTTPAddr: "127.0.0.1:0"})
	h, _ := s.Addrs()
	url := "http://" + h.String() + "/v1/logs"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bytes.Repeat([]byte("x"), 10000))
	zw.Close()
	for _, tt := range []struct {
		name, ctype string
		body        []byte
		hdr         map[string]string
		code        int
		msg         string
	}{
		{"protobuf garbage", "application/x-protobuf", []byte{0xff, 0xff, 0xff}, nil, 400, "OTLP protobuf"},
		{"JSON garbage", "application/json", []byte(`{"resourceLogs":[`), nil, 400, "OTLP JSON"},
		{"bad hex id", "application/json", []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"spanId":"EEE19B7EC3C1B17Z"}]}]}]}`), nil, 400, "hex"},
		{"content type", "text/plain", []byte("hi"), nil, 415, "Content-Type"},
		{"bad gzip", "application/x-protobuf", []byte("not gzip"), map[string]string{"Content-Encoding": "gzip"}, 400, "gzip"},
		{"body too large", "application/x-protobuf", make([]byte, 5000), nil, 413, "max_body_bytes"},
		{"gzip bomb", "application/x-protobuf", gz.Bytes(), map[string]string{"Content-Encoding": "gzip"}, 413, "max_body_bytes"},
		{"bad tenant", "application/x-protobuf", protoBody(t, request("a")), map[string]string{otlp.TenantHeader: "no/slash"}, 400, "tenant"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := post(t, url, tt.ctype, tt.body, tt.hdr)
			var st spb.Status
			var err error
			if tt.ctype == "application/json" {
				err = protojson.Unmarshal(b, &st)
			} else {
				err = proto.Unmarshal(b, &st)
			}
			if resp.StatusCode != tt.code || err != nil || !strings.Contains(st.GetMessage(), tt.msg) {
				t.Fatalf("status %d (%v) %q, want %d with %q", resp.StatusCode, err, st.GetMessage(), tt.code, tt.msg)
			}
		})
	}
	if got := recvtest.Texts(t, js, "default"); len(got) != 0 {
		t.Fatalf("WAL %q", got)
	}
}

// At the in-flight bound a request is refused at once, not queued: HTTP
// 429 with Retry-After, gRPC RESOURCE_EXHAUSTED with RetryInfo (without
// which OTLP exporters do not resend). The first request holds the bound
// while the WAL does not acknowledge (by construction) and is answered
// once it does.
func TestBusy(t *testing.T) {
	s0 := natstest.RunServer(t)
	_, js := natstest.Connect(t, s0.URL(), streams.Config{})
	gate := recvtest.NewGate(js)
	hub := recvtest.HubOn(t, gate, producer.Config{Receivers: producer.ReceiversConfig{MaxInFlightBytes: 1024, MaxLineBytes: 512}}, nil)
	s := start(t, hub, otlp.Config{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0"})
	h, g := s.Addrs()
	url := "http://" + h.String() + "/v1/logs"
	held := make([]string, 100)
	for i := range held {
		held[i] = "held"
	}
	first := make(chan int, 1)
	go func() {
		resp, _ := post(t, url, "application/x-protobuf", protoBody(t, request(held...)), nil)
		first <- resp.StatusCode
	}()
	recvtest.Wait(t, 10*time.Second, func() bool { return hub.InFlight() > 0 })
	resp, b := post(t, url, "application/x-protobuf", protoBody(t, request("second")), nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d (Retry-After %q): %q", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	conn, err := grpc.NewClient(g.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = collogspb.NewLogsServiceClient(conn).Export(ctx, request("third"))
	st := status.Convert(err)
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if st.Code() != codes.ResourceExhausted || retry == nil || retry.GetRetryDelay().AsDuration() <= 0 {
		t.Fatalf("grpc: %v (details %v), want RESOURCE_EXHAUSTED with RetryInfo", err, st.Details())
	}
	gate.Open()
	if code := <-first; code != http.StatusOK {
		t.Fatalf("first request: status %d", code)
	}
	if got := recvtest.Texts(t, js, "default"); len(got) != 100 || got[0] != "held" || got[99] != "held" {
		t.Fatalf("WAL holds %d lines, want the 100 held ones: %q", len(got), got)
	}
}

// When the WAL does not acknowledge within ack_timeout (held by
// construction), HTTP answers 503 with Retry-After and gRPC UNAVAILABLE
// with RetryInfo, instead of waiting on. The records were handed to the
// WAL: once it acknowledges they land, each once (nothing was resent).
func TestNotDurable(t *testing.T) {
	s0 := natstest.RunServer(t)
	_, js := natstest.Connect(t, s0.URL(), streams.Config{})
	gate := recvtest.NewGate(js)
	hub := recvtest.HubOn(t, gate, producer.Config{Receivers: producer.ReceiversConfig{AckTimeout: 200 * time.Millisecond}}, nil)
	t.Cleanup(gate.Open) // runs before the hub's cleanup, which drains the held frames
	s := start(t, hub, otlp.Config{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0"})
	h, g := s.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+h.String()+"/v1/logs", bytes.NewReader(protoBody(t, request("slow http"))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("http: %v (want a 503 within ack_timeout)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("http: status %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	conn, err := grpc.NewClient(g.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = collogspb.NewLogsServiceClient(conn).Export(ctx, request("slow grpc"))
	st := status.Convert(err)
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if st.Code() != codes.Unavailable || retry == nil || retry.GetRetryDelay().AsDuration() <= 0 {
		t.Fatalf("grpc: %v (details %v), want UNAVAILABLE with RetryInfo", err, st.Details())
	}
	gate.Open()
	recvtest.Wait(t, 30*time.Second, func() bool { return len(recvtest.Texts(t, js, "default")) >= 2 })
	got := recvtest.Texts(t, js, "default")
	sort.Strings(got)
	if !reflect.DeepEqual(got, []string{"slow grpc", "slow http"}) {
		t.Fatalf("WAL %q", got)
	}
}

// TLS with client certificates required (tls_client_ca), over HTTP and
// gRPC: a client without a certificate from the client CA is refused in
// the handshake and writes nothing; one with it writes.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	if err := tlsgen.Write(dir, []string{"127.0.0.1", "localhost"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	rc := producer.ReceiversConfig{TLSCert: filepath.Join(dir, tlsgen.Server), TLSKey: filepath.Join(dir, tlsgen.ServerKey), TLSClientCA: filepath.Join(dir, tlsgen.CA)}
	hub, js := recvtest.Hub(t, producer.Config{Receivers: rc}, nil)
	srvTLS, err := ingest.ServerTLS(hub.Config())
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, hub, otlp.Config{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", TLS: srvTLS})
	h, g := s.Addrs()
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(dir, tlsgen.CA))
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, tlsgen.Client), filepath.Join(dir, tlsgen.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	noCert := &tls.Config{RootCAs: pool}
	withCert := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}
	url := "https://" + h.String() + "/v1/logs"
	for _, c := range []struct {
		name string
		tc   *tls.Config
		ok   bool
	}{{"http without certificate", noCert, false}, {"http with certificate", withCert, true}} {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(protoBody(t, request(c.name))))
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := (&http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: c.tc}}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		if c.ok != (err == nil && resp.StatusCode == http.StatusOK) {
			t.Fatalf("%s: err %v, want ok %v", c.name, err, c.ok)
		}
	}
	for _, c := range []struct {
		name string
		tc   *tls.Config
		ok   bool
	}{{"grpc without certificate", noCert, false}, {"grpc with certificate", withCert, true}} {
		conn, err := grpc.NewClient(g.String(), grpc.WithTransportCredentials(credentials.NewTLS(c.tc)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = collogspb.NewLogsServiceClient(conn).Export(ctx, request(c.name))
		cancel()
		conn.Close()
		if c.ok != (err == nil) {
			t.Fatalf("%s: err %v, want ok %v", c.name, err, c.ok)
		}
	}
	got := recvtest.Texts(t, js, "default")
	sort.Strings(got)
	if !reflect.DeepEqual(got, []string{"grpc with certificate", "http with certificate"}) {
		t.Fatalf("WAL %q", got)
	}
}

// Tokens: the bearer token names the tenant, over HTTP and gRPC; none or
// an unknown one is 401 / UNAUTHENTICATED, a header tenant other than the
// token's 403 / PERMISSION_DENIED, and nothing of those is written.
func TestAuth(t *testing.T) {
	hub, js := recvtest.Hub(t, producer.Config{}, map[string]string{"tok1": "acme", "tok2": "globex"})
	s := start(t, hub, otlp.Config{HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0"})
	h, g := s.Addrs()
	url := "http://" + h.String() + "/v1/logs"
	conn, err := grpc.NewClient(g.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := collogspb.NewLogsServiceClient(conn)
	for _, tt := range []struct {
		name, authz, tenant string
		code                int
		grpcCode            codes.Code
	}{
		{"no token", "", "", 401, codes.Unauthenticated},
		{"unknown token", "Bearer nope", "", 401, codes.Unauthenticated},
		{"not bearer", "Basic tok1", "", 401, codes.Unauthenticated},
		{"other tenant", "Bearer tok1", "globex", 403, codes.PermissionDenied},
		{"token", "Bearer tok1", "", 200, codes.OK},
		{"token and its tenant", "Bearer tok2", "globex", 200, codes.OK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{"Authorization": tt.authz, otlp.TenantHeader: tt.tenant}
			if resp, b := post(t, url, "application/x-protobuf", protoBody(t, request("http "+tt.name)), hdr); resp.StatusCode != tt.code {
				t.Fatalf("http: status %d, want %d: %q", resp.StatusCode, tt.code, b)
			}
			md := metadata.MD{}
			if tt.authz != "" {
				md.Set("authorization", tt.authz)
			}
			if tt.tenant != "" {
				md.Set("x-quarry-tenant", tt.tenant)
			}
			ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 30*time.Second)
			defer cancel()
			if _, err := client.Export(ctx, request("grpc "+tt.name)); status.Code(err) != tt.grpcCode {
				t.Fatalf("grpc: %v, want %v", err, tt.grpcCode)
			}
		})
	}
	if got := recvtest.Texts(t, js, "acme"); !reflect.DeepEqual(got, []string{"http token", "grpc token"}) {
		t.Fatalf("acme: %q", got)
	}
	if got := recvtest.Texts(t, js, "globex"); !reflect.DeepEqual(got, []string{"http token and its tenant", "grpc token and its tenant"}) {
		t.Fatalf("globex: %q", got)
	}
}
