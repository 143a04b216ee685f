package encoder

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/promutil"
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
	v2Files     prometheus.Counter
	highFiles   prometheus.Counter
	splits      prometheus.Counter
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
		v2Files: prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_encoder_v2_files_total",
			Help: "Records files written in records v2 because template texts were missing or did not fit (see the log)."}),
		highFiles: prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_encoder_high_compression_files_total",
			Help: "Records files written at zstd's best level: flushed by age or at the drain with little buffered (high_compression_below)."}),
		splits: prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_encoder_report_splits_total",
			Help: "Flushes split in two because their report was over the NATS max payload."}),
	}
	if reg == nil {
		return m
	}
	m.batches = promutil.Register(reg, m.batches)
	m.records = promutil.Register(reg, m.records)
	m.files = promutil.Register(reg, m.files)
	m.bytes = promutil.Register(reg, m.bytes)
	m.deadLetters = promutil.Register(reg, m.deadLetters)
	m.flush = promutil.Register(reg, m.flush)
	m.verdicts = promutil.Register(reg, m.verdicts)
	m.inflight = promutil.Register(reg, m.inflight)
	m.v2Files = promutil.Register(reg, m.v2Files)
	m.highFiles = promutil.Register(reg, m.highFiles)
	m.splits = promutil.Register(reg, m.splits)
	return m
}
