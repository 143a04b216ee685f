package miner

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/mining"
)

// Config configures the miner stage.
type Config struct {
	// Mining configures the template engine. It must stay the same across
	// restarts: a snapshot restored with another config no longer gives the
	// ids an uninterrupted run gives (the miner warns when it differs).
	Mining mining.Config `yaml:"mining"`
	// SnapshotEvery writes a snapshot after this many WAL messages.
	SnapshotEvery int `yaml:"snapshot_every"`
	// SnapshotInterval writes a snapshot at least this often while messages
	// are mined.
	SnapshotInterval time.Duration `yaml:"snapshot_interval"`
	// SnapshotKeep is how many snapshots are kept in the object store; the
	// older ones are deleted after a new one is written.
	SnapshotKeep int `yaml:"snapshot_keep"`
	// SnapshotTimeout bounds writing (or reading) one snapshot.
	SnapshotTimeout time.Duration `yaml:"snapshot_timeout"`
	// OpTimeout bounds one JetStream lookup at start (the snapshot and
	// positions buckets, the streams, the list of snapshots): a request
	// whose reply a NATS restart lost is asked again after it, not after
	// SnapshotTimeout.
	OpTimeout time.Duration `yaml:"op_timeout"`
	// MaxInFlight bounds the WAL messages whose mined batch (and template
	// events) are published but not yet acked by JetStream.
	MaxInFlight int `yaml:"max_in_flight"`
	// PublishTimeout bounds the wait for one publish ack before it is
	// retried with the same Nats-Msg-Id.
	PublishTimeout time.Duration `yaml:"publish_timeout"`
	// RetryMin and RetryMax bound the exponential backoff between publish
	// retries. A batch is retried until it is acked; none is ever skipped.
	RetryMin time.Duration `yaml:"retry_min"`
	RetryMax time.Duration `yaml:"retry_max"`
	// BlockedAfter is how long a publish may stay unacked before Ready
	// reports publishing as blocked.
	BlockedAfter time.Duration `yaml:"blocked_after"`
	// PositionInterval is how often the acked WAL position is written to
	// KV quarry_positions (key "miner").
	PositionInterval time.Duration `yaml:"position_interval"`
	// FetchMessages and FetchBytes bound the WAL messages the ordered
	// consumer buffers ahead of the miner. FetchBytes is raised to the WAL's
	// max message size when it is smaller.
	FetchMessages int `yaml:"fetch_messages"`
	FetchBytes    int `yaml:"fetch_bytes"`
	// DrainTimeout bounds the shutdown: waiting for in-flight acks and
	// writing the final snapshot.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
}

// Default values.
const (
	DefaultSnapshotEvery    = 10000
	DefaultSnapshotInterval = 30 * time.Second
	DefaultSnapshotKeep     = 3
	DefaultSnapshotTimeout  = 2 * time.Minute
	DefaultOpTimeout        = 10 * time.Second
	DefaultMaxInFlight      = 256
	DefaultPublishTimeout   = 10 * time.Second
	DefaultRetryMin         = 100 * time.Millisecond
	DefaultRetryMax         = 5 * time.Second
	DefaultBlockedAfter     = 15 * time.Second
	DefaultPositionInterval = time.Second
	DefaultFetchMessages    = 64
	DefaultFetchBytes       = 32 << 20 // half the client's pending limit per subscription (64 MB)
	DefaultDrainTimeout     = 30 * time.Second
)

// Defaults returns c with unset fields set to their defaults.
func (c Config) Defaults() Config {
	c.Mining = c.Mining.Defaults()
	set := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	seti := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	seti(&c.SnapshotEvery, DefaultSnapshotEvery)
	set(&c.SnapshotInterval, DefaultSnapshotInterval)
	seti(&c.SnapshotKeep, DefaultSnapshotKeep)
	set(&c.SnapshotTimeout, DefaultSnapshotTimeout)
	set(&c.OpTimeout, DefaultOpTimeout)
	seti(&c.MaxInFlight, DefaultMaxInFlight)
	set(&c.PublishTimeout, DefaultPublishTimeout)
	set(&c.RetryMin, DefaultRetryMin)
	set(&c.RetryMax, DefaultRetryMax)
	set(&c.BlockedAfter, DefaultBlockedAfter)
	set(&c.PositionInterval, DefaultPositionInterval)
	seti(&c.FetchMessages, DefaultFetchMessages)
	seti(&c.FetchBytes, DefaultFetchBytes)
	set(&c.DrainTimeout, DefaultDrainTimeout)
	return c
}

// Validate reports every problem with c (call it after Defaults).
func (c Config) Validate() error {
	var errs []error
	if err := c.Mining.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("miner.mining: %w", err))
	}
	pos := func(name string, v int, min int) {
		if v < min {
			errs = append(errs, fmt.Errorf("miner.%s %d: must be at least %d", name, v, min))
		}
	}
	dur := func(name string, v, min time.Duration) {
		if v < min {
			errs = append(errs, fmt.Errorf("miner.%s %s: must be at least %s", name, v, min))
		}
	}
	pos("snapshot_every", c.SnapshotEvery, 1)
	dur("snapshot_interval", c.SnapshotInterval, 10*time.Millisecond)
	pos("snapshot_keep", c.SnapshotKeep, 1)
	dur("snapshot_timeout", c.SnapshotTimeout, time.Second)
	dur("op_timeout", c.OpTimeout, 10*time.Millisecond)
	pos("max_in_flight", c.MaxInFlight, 1)
	dur("publish_timeout", c.PublishTimeout, 100*time.Millisecond)
	dur("retry_min", c.RetryMin, time.Millisecond)
	if c.RetryMax < c.RetryMin {
		errs = append(errs, fmt.Errorf("miner.retry_max %s: must not be below retry_min %s", c.RetryMax, c.RetryMin))
	}
	dur("blocked_after", c.BlockedAfter, 100*time.Millisecond)
	dur("position_interval", c.PositionInterval, 10*time.Millisecond)
	pos("fetch_messages", c.FetchMessages, 1)
	pos("fetch_bytes", c.FetchBytes, 64<<10)
	dur("drain_timeout", c.DrainTimeout, 100*time.Millisecond)
	return errors.Join(errs...)
}

// Deps are the miner's collaborators.
type Deps struct {
	// JS is the JetStream context; the streams, the positions bucket and
	// the snapshot object store must exist (streams.Ensure).
	JS jetstream.JetStream
	// Log receives the miner's logs; nil discards them.
	Log *slog.Logger
	// Registerer receives the miner's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// retryPolicy is the backoff of every miner retry: RetryMin doubling to
// RetryMax, until the context ends.
func (c Config) retryPolicy() backoff.Policy {
	return backoff.Policy{Min: c.RetryMin, Max: c.RetryMax}
}
