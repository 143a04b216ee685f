package cdc

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/promutil"
)

type metrics struct {
	records   *prometheus.CounterVec
	frames    *prometheus.CounterVec
	errors    *prometheus.CounterVec
	lag       *prometheus.GaugeVec
	snapshots *prometheus.CounterVec
	// unverified counts restarts that found the WAL purged past the
	// stream's floor.
	unverified *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	lbl := []string{"capture_instance"}
	return &metrics{
		records: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_producer_cdc_records_total", Help: "CDC records (changes and snapshot rows) acked in the WAL."}, lbl)),
		frames: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_producer_cdc_frames_total", Help: "CDC frames acked in the WAL."}, lbl)),
		errors: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_producer_cdc_errors_total", Help: "CDC stream errors by kind (transient, fatal, dead_letter)."}, []string{"capture_instance", "kind"})),
		lag: promutil.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "quarry_producer_cdc_finalized_lag_seconds", Help: "Now minus the commit time up to which the capture instance is complete in the WAL."}, lbl)),
		snapshots: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_producer_cdc_snapshot_rows_total", Help: "Rows read by bootstrap snapshots."}, lbl)),
		unverified: promutil.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_producer_cdc_unverified_restarts_total", Help: "Restarts after a crash whose frames beyond the saved position may have been purged from the WAL (their changes may be written twice)."}, lbl)),
	}
}
