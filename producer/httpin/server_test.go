package httpin_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/internal/shippertest"
	"github.com/quarrylake/quarry/internal/tlsgen"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/httpin"
	"github.com/quarrylake/quarry/producer/ingest"
	"github.com/quarrylake/quarry/producer/internal/recvtest"
	"github.com/quarrylake/quarry/streams"
)

func TestEntry(t *testing.T) {
	fields := []string{"message", "log", "msg"}
	tests := []struct {
		name string
		doc  string
		want producer.Entry
		bad  string
	}{
		{name: "message and attrs", doc: `{"message":"GET / 200","host":{"name":"web1"},"n":12,"ok":true,"tags":["a","b"],"nil":null}`,
			want: producer.Entry{Text: "GET / 200", Attrs: []streams.Attr{{Key: "host.name", Value: "web1"}, {Key: "n", Value: "12"}, {Key: "ok", Value: "true"}, {Key: "tags", Value: `["a","b"]`}}}},
		{name: "log field, @timestamp", doc: `{"log":"x","@timestamp":"2026-01-02T03:04:05.5Z","k":"v"}`,
			want: producer.Entry{Text: "x", TS: time.Date(2026, 1, 2, 3, 4, 5, 5e8, time.UTC), Attrs: []streams.Attr{{Key: "k", Value: "v"}}}},
		{name: "msg, epoch millis timestamp", doc: `{"msg":"m","timestamp":1767322800123}`,
			want: producer.Entry{Text: "m", TS: time.UnixMilli(1767322800123).UTC()}},
		{name: "epoch seconds float", doc: `{"message":"m","timestamp":1767322800.25}`,
			want: producer.Entry{Text: "m", TS: time.Unix(1767322800, 25e7).UTC()}},
		{name: "unparsable timestamp stays an attribute", doc: `{"message":"m","timestamp":"soon"}`,
			want: producer.Entry{Text: "m", Attrs: []streams.Attr{{Key: "timestamp", Value: "soon"}}}},
		{name: "first message field wins", doc: `{"msg":"b","message":"a"}`,
			want: producer.Entry{Text: "a", Attrs: []streams.Attr{{Key: "msg", Value: "b"}}}},
		{name: "exact match before case-insensitive", doc: `{"MESSAGE":"b","log":"a"}`,
			want: producer.Entry{Text: "a", Attrs: []streams.Attr{{Key: "MESSAGE", Value: "b"}}}},
		{name: "case-insensitive (syslog-ng)", doc: `{"MESSAGE":"a","HOST":"h"}`,
			want: producer.Entry{Text: "a", Attrs: []streams.Attr{{Key: "HOST", Value: "h"}}}},
		{name: "non-string message", doc: `{"message":{"a":1}}`, want: producer.Entry{Text: `{"a":1}`}},
		{name: "no message field: the document is the text", doc: ` {"a":1} `, want: producer.Entry{Text: `{"a":1}`}},
		{name: "array", doc: `[1,2]`, bad: "not a JSON object"},
		{name: "garbage", doc: `{"message":`, bad: "not a JSON object"},
		{name: "null", doc: `null`, bad: "null"},
		{name: "two values", doc: `{"message":"a"} {"message":"b"}`, bad: "more than one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := httpin.Entry([]byte(tt.doc), fields)
			if tt.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tt.bad) {
					t.Fatalf("err %v, want one containing %q", err, tt.bad)
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

func FuzzEntry(f *testing.F) {
	for _, s := range []string{`{"message":"a","b":{"c":[1,{"d":2}]},"@timestamp":"2026-01-02T03:04:05Z"}`, `{"timestamp":1e300}`, `[]`, `{"log":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := httpin.Entry(b, []string{"message", "log"})
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, a := range e.Attrs {
			if seen[a.Key] && !strings.Contains(a.Key, ".") {
				t.Fatalf("attribute %q twice", a.Key)
			}
			seen[a.Key] = true
		}
	})
}

func start(t testing.TB, hub *ingest.Hub, tlsCfg *tls.Config) string {
	t.Helper()
	s, err := httpin.Listen("127.0.0.1:0", tlsCfg, hub)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("http run: %v", err)
		}
	})
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	return scheme + "://" + s.Addr().String()
}

func post(t *testing.T, c *http.Client, url, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// A _bulk body with one bad document and one bad action: the good
// documents are written once (by the time the answer comes), the bad ones
// are dead-lettered with their reason, and the answer says, per item in
// order, which failed, in Elasticsearch's format.
func TestBulkPartialFailure(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	hub := recvtest.HubOn(t, js, producer.Config{}, nil)
	url := start(t, hub, nil)
	body := `{"index":{"_index":"logs"}}
{"message":"user 1 logged in","@timestamp":"2026-01-02T03:04:05Z","user":{"id":1}}
{"create":{}}
{"message": broken
{"index":{}}
{"log":"user 2 logged in","level":"info"}
{"delete":{"_id":"x"}}
not an action
{"index":{}}
{"msg":"user 3 logged in"}
`
	resp, b := post(t, nil, url+"/acme/_bulk", body, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var br httpin.BulkResponse
	if err := json.Unmarshal(b, &br); err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, it := range br.Items {
		for op, r := range it {
			statuses = append(statuses, fmt.Sprintf("%s:%d", op, r.Status))
		}
	}
	want := []string{"index:201", "create:400", "index:201", "delete:400", "index:400", "index:201"}
	if !br.Errors || !reflect.DeepEqual(statuses, want) {
		t.Fatalf("errors %v, items %v, want %v\n%s", br.Errors, statuses, want, b)
	}
	recs := recvtest.Records(t, js, "acme")
	var texts []string
	for _, r := range recs {
		texts = append(texts, r.Text)
	}
	if !reflect.DeepEqual(texts, []string{"user 1 logged in", "user 2 logged in", "user 3 logged in"}) {
		t.Fatalf("WAL texts %q", texts)
	}
	if recs[0].TSSource != streams.TSEvent || recs[0].TS != time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano() {
		t.Fatalf("record 0 time %d (%v)", recs[0].TS, recs[0].TSSource)
	}
	if recvtest.Attr(recs[0], "user.id") != "1" || recvtest.Attr(recs[1], "level") != "info" {
		t.Fatalf("attrs %v %v", recs[0].Attrs, recs[1].Attrs)
	}
	dl := recvtest.DeadLetters(t, js)
	if len(dl) != 2 || dl[0].Payload != `{"message": broken` || !strings.Contains(dl[0].Reason, "not a JSON object") ||
		!strings.Contains(dl[1].Payload, "not an action") || !strings.Contains(dl[1].Reason, "bulk action") {
		t.Fatalf("dead letters %+v", dl)
	}
}

// JSON lines: malformed lines get 400 with their numbers and reasons, and
// the well-formed ones are written; the tenant comes from the query.
func TestJSONLines(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	hub := recvtest.HubOn(t, js, producer.Config{}, nil)
	url := start(t, hub, nil)
	resp, b := post(t, nil, url+"/jsonline?tenant=t1", "{\"message\":\"a\"}\r\n\n[1]\n{\"message\":\"b\"}", nil)
	var jr httpin.JSONLinesResponse
	if err := json.Unmarshal(b, &jr); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || jr.Accepted != 2 || len(jr.Failed) != 1 || jr.Failed[0].Line != 3 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if got := recvtest.Texts(t, js, "t1"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("WAL %q", got)
	}
	if dl := recvtest.DeadLetters(t, js); len(dl) != 1 || dl[0].Payload != "[1]" {
		t.Fatalf("dead letters %+v", dl)
	}
	// gzip, all good: 200.
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write([]byte(`{"message":"c"}` + "\n"))
	zw.Close()
	resp, b = post(t, nil, url+"/jsonline?tenant=t1", zb.String(), map[string]string{"Content-Encoding": "gzip"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("gzip: status %d: %s", resp.StatusCode, b)
	}
	if got := recvtest.Texts(t, js, "t1"); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("WAL %q", got)
	}
}

// Limits: a body above max_body_bytes is refused whole (413) and nothing
// of it is written; a line above max_line_bytes or with too many
// attributes is dead-lettered with the limit's name.
func TestLimits(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	hub := recvtest.HubOn(t, js, producer.Config{Receivers: producer.ReceiversConfig{MaxBodyBytes: 2048, MaxLineBytes: 200, MaxAttrs: 2}}, nil)
	url := start(t, hub, nil)
	resp, b := post(t, nil, url+"/jsonline", strings.Repeat(`{"message":"x"}`+"\n", 200), nil)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "max_body_bytes") {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	body := `{"message":"` + strings.Repeat("y", 300) + `"}` + "\n" + `{"message":"m","a":1,"b":2,"c":3}` + "\n" + `{"message":"ok","a":1}`
	resp, b = post(t, nil, url+"/jsonline", body, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "max_line_bytes") || !strings.Contains(string(b), "max_attrs") {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if got := recvtest.Texts(t, js, "default"); !reflect.DeepEqual(got, []string{"ok"}) {
		t.Fatalf("WAL %q", got)
	}
	if dl := recvtest.DeadLetters(t, js); len(dl) != 2 {
		t.Fatalf("dead letters %+v", dl)
	}
}

// At the in-flight bound a request is refused at once with 429 and
// Retry-After, not queued: the first request holds the bound while the
// WAL does not acknowledge (by construction), and is answered 200 once it
// does.
func TestBusy429(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	gate := recvtest.NewGate(js)
	hub := recvtest.HubOn(t, gate, producer.Config{Receivers: producer.ReceiversConfig{MaxInFlightBytes: 1024, MaxLineBytes: 512}}, nil)
	url := start(t, hub, nil)
	first := make(chan int, 1)
	go func() {
		resp, _ := post(t, nil, url+"/jsonline", strings.Repeat(`{"message":"held"}`+"\n", 100), nil)
		first <- resp.StatusCode
	}()
	// The first request holds the bound before the second is sent.
	recvtest.Wait(t, 10*time.Second, func() bool { return hub.InFlight() > 0 })
	resp, b := post(t, nil, url+"/jsonline", `{"message":"second"}`, nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d (Retry-After %q): %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
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
// construction), a request is answered 503 with Retry-After instead of
// waiting on: JSON lines and _bulk alike. The lines were handed to the
// WAL, so once it acknowledges they land, each once (the client did not
// resend).
func TestNotDurable503(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	gate := recvtest.NewGate(js)
	hub := recvtest.HubOn(t, gate, producer.Config{Receivers: producer.ReceiversConfig{AckTimeout: 200 * time.Millisecond}}, nil)
	t.Cleanup(gate.Open) // runs before the hub's cleanup, which drains the held frames
	url := start(t, hub, nil)
	c := &http.Client{Timeout: 30 * time.Second} // no answer at all fails here, not at the test timeout
	for _, p := range []struct{ path, body string }{
		{"/jsonline", `{"message":"slow one"}`},
		{"/_bulk", `{"index":{}}` + "\n" + `{"message":"slow two"}` + "\n"},
	} {
		resp, b := post(t, c, url+p.path, p.body, nil)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "ack_timeout") {
			t.Fatalf("%s: status %d (Retry-After %q): %s; want 503 with Retry-After", p.path, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	}
	gate.Open()
	recvtest.Wait(t, 30*time.Second, func() bool { return len(recvtest.Texts(t, js, "default")) >= 2 })
	if got := recvtest.Texts(t, js, "default"); !reflect.DeepEqual(got, []string{"slow one", "slow two"}) {
		t.Fatalf("WAL %q", got)
	}
}

// Tokens: the credential names the tenant; none or an unknown one is 401,
// a path tenant other than the token's is 403. Bearer, Basic (the token
// as password) and ApiKey are accepted.
func TestAuth(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	tokens, err := ingest.ParseTokens("s3cret=acme, other=globex")
	if err != nil {
		t.Fatal(err)
	}
	hub := recvtest.HubOn(t, js, producer.Config{}, tokens)
	url := start(t, hub, nil)
	doc := `{"message":"m"}`
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		code       int
	}{
		{"no token", "/jsonline", nil, http.StatusUnauthorized},
		{"unknown token", "/jsonline", map[string]string{"Authorization": "Bearer nope"}, http.StatusUnauthorized},
		{"bearer", "/jsonline", map[string]string{"Authorization": "Bearer s3cret"}, http.StatusOK},
		{"basic", "/_bulk", map[string]string{"Authorization": "Basic " + b64("elastic:s3cret")}, http.StatusOK},
		{"apikey id:key", "/_bulk", map[string]string{"Authorization": "ApiKey " + b64("id:s3cret")}, http.StatusOK},
		{"wrong tenant in path", "/globex/_bulk", map[string]string{"Authorization": "Bearer s3cret"}, http.StatusForbidden},
		{"wrong tenant in header", "/jsonline", map[string]string{"Authorization": "Bearer s3cret", httpin.TenantHeader: "globex"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := doc
			if strings.HasSuffix(tc.path, "_bulk") {
				body = `{"index":{}}` + "\n" + doc + "\n"
			}
			resp, b := post(t, nil, url+tc.path, body, tc.hdr)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, b)
			}
		})
	}
	if got := recvtest.Texts(t, js, "acme"); len(got) != 3 {
		t.Fatalf("acme WAL %q, want 3 lines", got)
	}
	if got := recvtest.Texts(t, js, "globex"); len(got) != 0 {
		t.Fatalf("globex WAL %q, want none", got)
	}
}

func b64(s string) string {
	req, _ := http.NewRequest("GET", "/", nil)
	user, pass, _ := strings.Cut(s, ":")
	req.SetBasicAuth(user, pass)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// mTLS: a client without a certificate from the client CA is refused in
// the handshake; one with it writes.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	if err := tlsgen.Write(dir, []string{"127.0.0.1", "localhost"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	rc := producer.ReceiversConfig{TLSCert: filepath.Join(dir, tlsgen.Server), TLSKey: filepath.Join(dir, tlsgen.ServerKey), TLSClientCA: filepath.Join(dir, tlsgen.CA)}
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	hub := recvtest.HubOn(t, js, producer.Config{Receivers: rc}, nil)
	srvTLS, err := ingest.ServerTLS(hub.Config())
	if err != nil {
		t.Fatal(err)
	}
	url := start(t, hub, srvTLS)
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(dir, tlsgen.CA))
	pool.AppendCertsFromPEM(caPEM)
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest(http.MethodPost, url+"/jsonline", strings.NewReader(`{"message":"x"}`))
	if resp, err := noCert.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("client without certificate got %d", resp.StatusCode)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, tlsgen.Client), filepath.Join(dir, tlsgen.ClientKey))
	if err != nil {
		t.Fatal(err)
	}
	withCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	resp, b := post(t, withCert, url+"/jsonline", `{"message":"over mtls"}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if got := recvtest.Texts(t, js, "default"); !reflect.DeepEqual(got, []string{"over mtls"}) {
		t.Fatalf("WAL %q", got)
	}
}

// syslog-ng's elasticsearch-http() destination (the SCL wrapper of http())
// posts a file's lines to /<tenant>/_bulk, and its http() destination
// posts JSON lines to /jsonline: every line reaches the WAL exactly once,
// with syslog-ng's fields as attributes.
func TestSyslogNGHTTP(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	hub := recvtest.HubOn(t, js, producer.Config{}, nil)
	url := start(t, hub, nil)
	bulkFile, bulkWant := shippertest.Numbered(t, "bulk", 1000)
	jsonFile, jsonWant := shippertest.Numbered(t, "jsonline", 1000)
	d := shippertest.SyslogNG(t, fmt.Sprintf(`
source s_bulk { file(%q follow-freq(0.1) flags(no-parse)); };
source s_json { file(%q follow-freq(0.1) flags(no-parse)); };
destination d_bulk { elasticsearch-http(url(%q) index("ignored") type("") batch-lines(100) workers(2)); };
destination d_json {
  http(url(%q) method("POST") headers("Content-Type: application/x-ndjson")
    body("$(format-json message=$MSG host=$HOST program=$PROGRAM @timestamp=$ISODATE)")
    batch-lines(100) workers(2));
};
log { source(s_bulk); destination(d_bulk); };
log { source(s_json); destination(d_json); };
`, bulkFile, jsonFile, url+"/bulkt/_bulk", url+"/jsonline?tenant=jsont"))
	acked := func(tenant string) uint64 {
		for _, st := range hub.Stats() {
			if st.Source == ingest.SourceID(tenant) {
				return st.Lines
			}
		}
		return 0
	}
	recvtest.Wait(t, time.Minute, func() bool {
		d.Check(t)
		return acked("bulkt") >= 1000 && acked("jsont") >= 1000
	})
	for _, c := range []struct {
		tenant string
		want   []string
	}{{"bulkt", bulkWant}, {"jsont", jsonWant}} {
		recs := recvtest.Records(t, js, c.tenant)
		var got []string
		for _, r := range recs {
			got = append(got, r.Text)
		}
		shippertest.ExactlyOnce(t, got, c.want)
		if r := recs[0]; r.TSSource != streams.TSEvent || recvtest.Attr(r, "host")+recvtest.Attr(r, "HOST") == "" {
			t.Fatalf("%s: record %q: time source %v, attrs %v", c.tenant, r.Text, r.TSSource, r.Attrs)
		}
	}
}

// The Elasticsearch probes shippers make answer like Elasticsearch 8, at
// the root and under a tenant path prefix.
func TestESProbes(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	url := start(t, recvtest.HubOn(t, js, producer.Config{}, nil), nil)
	for _, p := range []string{"/", "/acme", "/acme/"} {
		resp, err := http.Get(url + p)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Version struct{ Number string } `json:"version"`
		}
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err != nil || !strings.HasPrefix(v.Version.Number, "8.") || resp.Header.Get("X-Elastic-Product") != "Elasticsearch" {
			t.Fatalf("GET %s: version %q, header %q, err %v", p, v.Version.Number, resp.Header.Get("X-Elastic-Product"), err)
		}
	}
	for _, p := range []string{"/_license", "/acme/_license"} {
		resp, err := http.Get(url + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"license"`) {
			t.Fatalf("GET %s: %s", p, b)
		}
	}
}
