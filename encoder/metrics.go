package encoder

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	batches     prometheus.Counter
	records     prometheus.Counter
	files       prometheus.Counter
	bytes       prometheus.Counter
	deadLetters prometheus.Counter
	flush       prometheus.Histogram
	verdicts    *prometheus.CounterVec
	inflight    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		batches: prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_encoder_batches_total",
			Help: "Mined batches received and buffered."}),
		records: prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_encoder_records_total",
			Help: "Records written to Parquet files."}),
		files: prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_encoder_files_total",
			Help: "Parquet files uploaded."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_encoder_bytes_total",
			Help: "Bytes of Parquet files uploaded."}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_encoder_dead_letters_total",
			Help: "Batches that did not decode, sent to the dead-letter stream."}),
		flush: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "quarry_encoder_flush_seconds",
			Help:    "Time to encode, upload and report one flush.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quarry_encoder_verdicts_total",
			Help: "Verdicts received on reports, by result (accepted, rejected)."}, []string{"result"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "quarry_encoder_inflight_batches",
			Help: "Batches held unacked: buffered or waiting for a verdict."}),
	}
	if reg == nil {
		return m
	}
	m.batches = register(reg, m.batches)
	m.records = register(reg, m.records)
	m.files = register(reg, m.files)
	m.bytes = register(reg, m.bytes)
	m.deadLetters = register(reg, m.deadLetters)
	m.flush = register(reg, m.flush)
	m.verdicts = register(reg, m.verdicts)
	m.inflight = register(reg, m.inflight)
	return m
}

// register registers c, or returns the collector already registered under
// its name (several encoders in one process share the metrics).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if ex, ok := are.ExistingCollector.(C); ok {
				return ex
			}
		}
		// A conflicting registration is a programming error of the
		// caller's registry; keep counting on the unregistered collector.
	}
	return c
}
