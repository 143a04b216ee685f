package promutil

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRegisterSharesCollectors(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "quarry_test_things_total", Help: "Things."}
	a := Register(reg, prometheus.NewCounter(opts))
	b := Register(reg, prometheus.NewCounter(opts))
	if a != b {
		t.Fatal("a second registration of the same name did not return the first collector")
	}
	b.Inc()
	if got := testutil.ToFloat64(a); got != 1 {
		t.Fatalf("shared counter = %v, want 1", got)
	}
	// Another type under the same name: counts, unregistered.
	g := Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "quarry_test_things_total", Help: "Things."}))
	g.Set(5)
	if n, err := testutil.GatherAndCount(reg, "quarry_test_things_total"); err != nil || n != 1 {
		t.Fatalf("registry holds %d series (%v), want the counter only", n, err)
	}
	// No registry: the collector works on its own.
	c := Register[prometheus.Counter](nil, prometheus.NewCounter(opts))
	c.Add(2)
	if got := testutil.ToFloat64(c); got != 2 {
		t.Fatalf("unregistered counter = %v", got)
	}
}

func TestRegisterUnique(t *testing.T) {
	reg := prometheus.NewRegistry()
	newSet := func() []prometheus.Collector {
		return []prometheus.Collector{
			prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_test_a_total", Help: "A."}),
			prometheus.NewGauge(prometheus.GaugeOpts{Name: "quarry_test_b", Help: "B."}),
		}
	}
	if err := RegisterUnique(reg, newSet()...); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 2 {
		t.Fatalf("registry holds %d series (%v), want 2", n, err)
	}
	err := RegisterUnique(reg, newSet()...)
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("second registration: err %v, want AlreadyRegisteredError", err)
	}
	if strings.Count(err.Error(), "\n") != 1 {
		t.Fatalf("err %q does not report both collectors", err)
	}
	if err := RegisterUnique(nil, newSet()...); err != nil {
		t.Fatalf("nil registry: %v", err)
	}
}
