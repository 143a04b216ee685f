package health

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_test_things_total", Help: "x"})
	reg.MustRegister(c)
	c.Inc()
	s := New(reg, nil)
	var waiting error = errors.New("waiting for batch 7")
	s.Add("committer", func() error { return waiting })
	s.Add("miner", func() error { return nil })
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	code, body := get("/readyz")
	if code != 503 || !strings.Contains(body, "committer: waiting for batch 7") {
		t.Fatalf("readyz %d %q", code, body)
	}
	waiting = nil
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("readyz after ready %d", code)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "quarry_test_things_total 1") {
		t.Fatalf("metrics missing counter: %q", body)
	}
}
