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

// An Info line shows on /readyz whatever the verdict and never makes the
// process unready.
func TestReadyzInfo(t *testing.T) {
	s := New(nil, nil)
	var waiting error
	s.Add("committer", func() error { return waiting })
	s.AddInfo("committer", func() string { return "dead letters: 3" })
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		name     string
		waiting  error
		code     int
		contains []string
	}{
		{"ready", nil, 200, []string{"ready\n", "committer: dead letters: 3\n"}},
		{"unready", errors.New("standby"), 503, []string{"committer: standby\n", "committer: dead letters: 3\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waiting = tc.waiting
			resp, err := http.Get(srv.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("code %d, want %d: %q", resp.StatusCode, tc.code, b)
			}
			for _, w := range tc.contains {
				if !strings.Contains(string(b), w) {
					t.Errorf("body %q lacks %q", b, w)
				}
			}
		})
	}
}
