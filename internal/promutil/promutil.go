// Package promutil holds the Prometheus plumbing the stages share.
package promutil

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg and returns it, or returns the collector
// of the same type already registered under its name, so that several
// instances in one process (encoders, line sources, CDC streams) count on
// shared collectors. A nil reg registers nothing. A conflicting collector of
// another type leaves c unregistered: it still counts, unexported.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(C); ok {
				return old
			}
		}
	}
	return c
}

// RegisterUnique registers every collector with reg for a stage that runs
// once per process (the miner, the committer): a name already registered is
// an error, not a collector to share, so a second instance on one registry
// is refused instead of silently counting into the first one's series.
// Every collector is tried and every failure reported. A nil reg registers
// nothing.
func RegisterUnique(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	var errs []error
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
