package miner

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/internal/promutil"
)

type metrics struct {
	frames          prometheus.Counter
	records         prometheus.Counter
	templates       prometheus.Gauge
	evicted         prometheus.Gauge
	oversized       prometheus.Gauge
	templateEvents  *prometheus.CounterVec
	quarantined     prometheus.Counter
	walLag          prometheus.Gauge
	position        prometheus.Gauge
	snapshotSeconds prometheus.Histogram
	snapshotErrors  prometheus.Counter
	snapshotSkipped prometheus.Counter
	publishRetries  prometheus.Counter
	inFlight        prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		frames: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quarry_miner_frames_total", Help: "WAL messages mined (including malformed ones)."}),
		records: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quarry_miner_records_total", Help: "Records mined into templates."}),
		templates: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quarry_miner_templates", Help: "Live templates over all tenants."}),
		evicted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quarry_miner_evicted_templates", Help: "Templates evicted by the per-tenant cap (least recently used first) since the model began; restored with the snapshot."}),
		oversized: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quarry_miner_oversized_lines", Help: "Lines over the mining limits, kept whole as the single parameter of the tenant's oversized template, since the model began."}),
		templateEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quarry_miner_template_events_total", Help: "Template events by kind (created, changed, merged)."}, []string{"kind"}),
		quarantined: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quarry_miner_quarantined_total", Help: "Records and frames sent to the dead-letter stream."}),
		walLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quarry_miner_wal_lag_messages", Help: "WAL messages after the one mined last."}),
		position: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quarry_miner_acked_wal_seq", Help: "Last WAL sequence whose mined batch (and every one before) JetStream acked."}),
		snapshotSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "quarry_miner_snapshot_seconds", Help: "Time to write one snapshot to the object store.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		snapshotErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quarry_miner_snapshot_errors_total", Help: "Snapshots that could not be written."}),
		snapshotSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quarry_miner_snapshot_skipped_total", Help: "Snapshots skipped on restore because they did not read or decode."}),
		publishRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "quarry_miner_publish_retries_total", Help: "Publishes retried after an error or a missing ack."}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quarry_miner_in_flight_batches", Help: "Mined batches published and not yet acked."}),
	}
	for _, k := range []string{"created", "changed", "merged"} {
		m.templateEvents.WithLabelValues(k)
	}
	if err := promutil.RegisterUnique(reg, m.frames, m.records, m.templates, m.evicted, m.oversized, m.templateEvents, m.quarantined,
		m.walLag, m.position, m.snapshotSeconds, m.snapshotErrors, m.snapshotSkipped, m.publishRetries, m.inFlight); err != nil {
		return nil, fmt.Errorf("register miner metrics: %w", err)
	}
	return m, nil
}

// setModel publishes the model's template counters.
func (m *metrics) setModel(st mining.Stats) {
	m.templates.Set(float64(st.Templates))
	m.evicted.Set(float64(st.Evictions))
	m.oversized.Set(float64(st.Oversized))
}
