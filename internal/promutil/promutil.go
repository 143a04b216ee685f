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
