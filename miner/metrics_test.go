package miner

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestNewRefusesSecondRegistration: the miner runs once per process, so a
// second one on the same registry is an error, not shared series.
func TestNewRefusesSecondRegistration(t *testing.T) {
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	if _, err := New(testConfig(), Deps{JS: e.js, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	_, err := New(testConfig(), Deps{JS: e.js, Registerer: reg})
	if err == nil || !strings.Contains(err.Error(), "register miner metrics") {
		t.Fatalf("second miner on one registry: err %v", err)
	}
}
