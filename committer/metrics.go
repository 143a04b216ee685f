package committer

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/promutil"
)

type metrics struct {
	highWater   prometheus.Gauge
	commits     prometheus.Counter
	reports     *prometheus.CounterVec
	commitTime  prometheus.Histogram
	leaseHeld   prometheus.Gauge
	pending     prometheus.Gauge
	deadLetters prometheus.Counter

	checkpoints       *prometheus.CounterVec
	checkpointVersion *prometheus.GaugeVec
	checkpointTime    prometheus.Histogram
	logVersions       *prometheus.CounterVec
	logCleanupErrors  *prometheus.CounterVec

	maintFiles  *prometheus.CounterVec
	maintPasses *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, extra ...prometheus.Collector) (*metrics, error) {
	m := &metrics{
		highWater: prometheus.NewGauge(prometheus.GaugeOpts{Name: "quarry_committer_high_water",
			Help: "Committed high-water: the WAL sequence at or below which every batch is in the lake."}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_committer_commits_total",
			Help: "High-water advances committed (one Delta commit per table each)."}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quarry_committer_reports_total",
			Help: "Reports judged, by verdict (accepted, rejected, malformed, conflict)."}, []string{"verdict"}),
		commitTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "quarry_committer_commit_seconds",
			Help:    "Time to write one advance: both Delta commits and the high-water key.",
			Buckets: prometheus.ExponentialBuckets(0.002, 2, 14)}),
		leaseHeld: prometheus.NewGauge(prometheus.GaugeOpts{Name: "quarry_committer_lease_held",
			Help: "1 while this committer holds the lease and is active, else 0."}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "quarry_committer_pending_batches",
			Help: "Accepted batches above the high-water, waiting for the barrier."}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{Name: "quarry_committer_dead_letters_total",
			Help: "Reports sent to the dead-letter stream (malformed or conflicting)."}),
		checkpoints: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quarry_committer_checkpoints_total",
			Help: "Delta checkpoints attempted, by table and result (ok, error)."}, []string{"table", "result"}),
		checkpointVersion: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "quarry_committer_checkpoint_version",
			Help: "Version of the newest Delta checkpoint this committer wrote, by table."}, []string{"table"}),
		checkpointTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "quarry_committer_checkpoint_seconds",
			Help:    "Time to write one Delta checkpoint and _last_checkpoint.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		logVersions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quarry_committer_log_versions_deleted_total",
			Help: "Delta log versions (JSON commit and checkpoint) deleted by the log cleanup, by table."}, []string{"table"}),
		logCleanupErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quarry_committer_log_cleanup_errors_total",
			Help: "Log cleanups that failed (retried after the next checkpoint), by table."}, []string{"table"}),
		maintFiles: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quarry_committer_maintenance_files_total",
			Help: "Records and templates files removed by compaction (compacted), records files removed by retention (expired), files written by compaction (written) or by retention with the kept rows of a file it cut (retained)."}, []string{"op"}),
		maintPasses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quarry_committer_maintenance_passes_total",
			Help: "Retention and compaction passes (the background's and Maintain's), by result (ok, error, skipped: a partition or the templates table could not be rewritten)."}, []string{"result"}),
	}
	cs := append([]prometheus.Collector{m.highWater, m.commits, m.reports, m.commitTime, m.leaseHeld, m.pending, m.deadLetters,
		m.checkpoints, m.checkpointVersion, m.checkpointTime, m.logVersions, m.logCleanupErrors, m.maintFiles, m.maintPasses}, extra...)
	if err := promutil.RegisterUnique(reg, cs...); err != nil {
		return nil, fmt.Errorf("register committer metrics: %w", err)
	}
	return m, nil
}
