package committer

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
)

// Config configures a committer.
type Config struct {
	// Name identifies this committer in the lease and in commitInfo; it must
	// be unique among running committers. Default: hostname-pid-random.
	Name string `yaml:"name"`
	// LeaseTTL is how long a lease lasts without renewal: a standby takes
	// over at most about LeaseTTL after the active committer stopped
	// renewing. The lease is renewed every LeaseTTL/3. Default 10s.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// CommitInterval is the least time between two high-water advances, so a
	// busy lake gets one commit per interval rather than one per report.
	// One exception: an advance that covers the WAL's last frame (the
	// pipeline drained, so no report can come before more lines do) is
	// committed once no report came for CommitInterval/10 (5ms to 100ms),
	// without waiting for the interval to end. Default 1s.
	CommitInterval time.Duration `yaml:"commit_interval"`
	// PurgeWAL purges streams.WALStream below min(high-water, oldest stored
	// miner snapshot sequence)+1 after each advance: the miner falls back to
	// an older snapshot when the newest is corrupt. It never purges at or
	// above a producer's WAL floor (see FloorMaxAge). Default true: every
	// frame it purges is committed and covered by every snapshot the miner
	// may restore (docs/architecture.md, crash matrix), and without it the
	// WAL keeps every frame ever written.
	PurgeWAL *bool `yaml:"purge_wal"`
	// PurgeReports purges the prefix of streams.ReportStream whose reports
	// cover only batches at or below the high-water. Default true: a
	// rebuild needs only the Delta log and the reports above the
	// high-water, and without it the stream keeps every report.
	PurgeReports *bool `yaml:"purge_reports"`
	// FloorMaxAge bounds how long a producer's WAL floor (streams.FloorKey)
	// holds back the WAL purge after it was last updated: a producer that is
	// down longer than this may, when it comes back, republish frames whose
	// ack it never recorded (duplicates in the lake). Default 24h.
	FloorMaxAge time.Duration `yaml:"floor_max_age"`
	// StallAfter is how long the barrier may wait for a missing batch
	// before Ready reports it. Default 1m.
	StallAfter time.Duration `yaml:"stall_after"`
	// OpTimeout bounds each key-value, object store and Delta call. Default 10s.
	OpTimeout time.Duration `yaml:"op_timeout"`
	// ShutdownTimeout bounds the final commit after the context is cancelled.
	// Default 10s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// CheckpointInterval is how many versions of a table lie between two
	// Delta checkpoints: after the commit of every multiple of it, a
	// checkpoint of that table is written in the background (never holding
	// up the high-water). Default 100. Left unset, a table's
	// delta.checkpointInterval wins (see tableprops.go).
	CheckpointInterval int `yaml:"checkpoint_interval"`
	// LogRetention is how long the JSON commits and checkpoints of a
	// table's _delta_log are kept (Delta's delta.logRetentionDuration,
	// whose default is the same): after each checkpoint, the log entries
	// older than it that the newest checkpoint covers are deleted
	// (delta.Table.CleanupLog), so time travel reaches back at least this
	// far. Default 720h (30 days). Left unset, a table's
	// delta.logRetentionDuration wins (see tableprops.go).
	LogRetention time.Duration `yaml:"log_retention"`
	// TombstoneRetention is how long a checkpoint keeps the remove
	// tombstone of a file the table removed (compaction, retention, the
	// progress table's overwrites), after its deletionTimestamp: Delta's
	// delta.deletedFileRetentionDuration. An older tombstone is left out
	// of the next checkpoint (PROTOCOL.md: checkpoints hold tombstones
	// "until they are expired"), so checkpoints do not grow with every
	// remove ever committed; one naming a batch above the high-water is
	// kept (a replayed report could otherwise be judged again). It must be
	// at least lake.DefaultGrace, vacuum's default grace, which reads the
	// removal time from the tombstone. Default lake.DefaultGrace (7 days).
	// Left unset, a table's delta.deletedFileRetentionDuration wins (see
	// tableprops.go).
	TombstoneRetention time.Duration `yaml:"tombstone_retention"`
	// ProgressInterval is the least time between two commits of the
	// progress table (each removes the previous file and adds a new one);
	// commitInfo carries the progress of every commit regardless.
	// Default 1m.
	ProgressInterval time.Duration `yaml:"progress_interval"`
	// FetchBatch is how many reports one fetch from the report stream asks
	// for (a fetch never waits past the next commit, see doc.go). Default
	// 256.
	FetchBatch int `yaml:"fetch_batch"`
	// Compaction rewrites the small files of closed partitions (see
	// Compaction).
	Compaction Compaction `yaml:"compaction"`
	// Retention removes date partitions older than a tenant's retention
	// (see Retention).
	Retention Retention `yaml:"retention"`

	// defaulted records which lifecycle fields Defaults filled: only those
	// a table's own properties override (tableprops.go).
	defaulted lifecycleSet
}

// DefaultLogRetention is Config.LogRetention's default: 30 days, as Delta's
// delta.logRetentionDuration.
const DefaultLogRetention = 30 * 24 * time.Hour

// Defaults returns c with unset fields set to their defaults.
func (c Config) Defaults() Config {
	if c.Name == "" {
		c.Name = defaultName()
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 10 * time.Second
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = time.Second
	}
	if c.PurgeWAL == nil {
		c.PurgeWAL = ptrTrue()
	}
	if c.PurgeReports == nil {
		c.PurgeReports = ptrTrue()
	}
	if c.FloorMaxAge == 0 {
		c.FloorMaxAge = 24 * time.Hour
	}
	if c.StallAfter == 0 {
		c.StallAfter = time.Minute
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 10 * time.Second
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.FetchBatch == 0 {
		c.FetchBatch = 256
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = 100
		c.defaulted.checkpointInterval = true
	}
	if c.LogRetention == 0 {
		c.LogRetention = DefaultLogRetention
		c.defaulted.logRetention = true
	}
	if c.TombstoneRetention == 0 {
		c.TombstoneRetention = lake.DefaultGrace
		c.defaulted.tombstoneRetention = true
	}
	c.Compaction = c.Compaction.Defaults()
	if c.ProgressInterval == 0 {
		c.ProgressInterval = time.Minute
	}
	return c
}

func ptrTrue() *bool { t := true; return &t }

// purgeWAL and purgeReports read the options, unset meaning the default.
func (c Config) purgeWAL() bool     { return c.PurgeWAL == nil || *c.PurgeWAL }
func (c Config) purgeReports() bool { return c.PurgeReports == nil || *c.PurgeReports }

func defaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "committer"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if c.Name == "" || len(c.Name) > 256 {
		errs = append(errs, fmt.Errorf("committer.name %q: must be 1 to 256 bytes", c.Name))
	}
	if c.LeaseTTL < 100*time.Millisecond || c.LeaseTTL > 10*time.Minute {
		errs = append(errs, fmt.Errorf("committer.lease_ttl %s: must be 100ms to 10m", c.LeaseTTL))
	}
	if c.CommitInterval < 0 || c.CommitInterval > time.Hour {
		errs = append(errs, fmt.Errorf("committer.commit_interval %s: must be 0 to 1h", c.CommitInterval))
	}
	if c.FloorMaxAge <= 0 {
		errs = append(errs, fmt.Errorf("committer.floor_max_age %s: must be positive", c.FloorMaxAge))
	}
	if c.StallAfter <= 0 {
		errs = append(errs, fmt.Errorf("committer.stall_after %s: must be positive", c.StallAfter))
	}
	if c.OpTimeout < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("committer.op_timeout %s: must be at least 10ms", c.OpTimeout))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("committer.shutdown_timeout %s: must be positive", c.ShutdownTimeout))
	}
	if c.FetchBatch < 1 || c.FetchBatch > 10000 {
		errs = append(errs, fmt.Errorf("committer.fetch_batch %d: must be 1 to 10000", c.FetchBatch))
	}
	if c.CheckpointInterval < 1 || c.CheckpointInterval > 1_000_000 {
		errs = append(errs, fmt.Errorf("committer.checkpoint_interval %d: must be 1 to 1000000", c.CheckpointInterval))
	}
	if c.LogRetention < time.Hour {
		errs = append(errs, fmt.Errorf("committer.log_retention %s: must be at least 1h", c.LogRetention))
	}
	if c.TombstoneRetention < lake.DefaultGrace {
		errs = append(errs, fmt.Errorf("committer.tombstone_retention %s: must be at least %s (vacuum's default grace)",
			c.TombstoneRetention, lake.DefaultGrace))
	}
	errs = append(errs, c.Compaction.Validate(), c.Retention.Validate())
	if c.ProgressInterval < 0 || c.ProgressInterval > 24*time.Hour {
		errs = append(errs, fmt.Errorf("committer.progress_interval %s: must be 0 to 24h", c.ProgressInterval))
	}
	return errors.Join(errs...)
}

// Deps are the committer's collaborators.
type Deps struct {
	JS    jetstream.JetStream
	Store objstore.Store // the lake root
	// Log receives the committer's logs; nil discards them.
	Log *slog.Logger
	// Registerer registers the committer's metrics; nil does not register.
	Registerer prometheus.Registerer
}
