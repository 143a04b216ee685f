package producer

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/internal/promutil"
	"github.com/quarrylake/quarry/streams"
)

// Config configures a line source.
type Config struct {
	// Tenant owns the lines; frames go to streams.LineSubject(Tenant).
	Tenant string `yaml:"tenant"`
	// Source is the source id: it names the position key
	// "producer.<source>" and prefixes every Nats-Msg-Id. Default: derived
	// from the file path (streams.SanitizeToken of the absolute path),
	// "stdin-<run id>" for a reader, "nats-<tenant>" for the ingest
	// subject, "gen-<tenant>" for the generator. For a reader the run id is
	// appended to a configured Source as well.
	Source string `yaml:"source"`
	// FrameMaxBytes cuts a frame before it would exceed this encoded size
	// (a frame holds at least one line, so one long line may exceed it).
	FrameMaxBytes int `yaml:"frame_max_bytes"`
	// FrameMaxRecords cuts a frame at this many lines.
	FrameMaxRecords int `yaml:"frame_max_records"`
	// Linger cuts a frame this long after its first line was read. A frame
	// that ends a request (a receiver's or the ingest subject's) with
	// nothing read behind it is cut at once.
	Linger time.Duration `yaml:"linger"`
	// MaxRecordBytes is the longest line (without its '\n'); a longer line
	// is dead-lettered.
	MaxRecordBytes int `yaml:"max_record_bytes"`
	// Follow keeps reading a file at its end, polling for growth every
	// PollInterval.
	Follow       bool          `yaml:"follow"`
	PollInterval time.Duration `yaml:"poll_interval"`
	// Rate caps the lines read per second (0: as fast as they can be
	// published). It paces a backfill so that it does not starve live
	// sources sharing the WAL; frames still cut by size, count and Linger.
	Rate float64 `yaml:"rate"`
	// StartTimeout bounds how long a starting source retries JetStream
	// while it is unavailable (a cluster electing leaders) before it fails.
	StartTimeout time.Duration `yaml:"start_timeout"`
	// DrainTimeout bounds the wait for in-flight frames on shutdown.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// ProgressInterval is the least time between two progress facts.
	ProgressInterval time.Duration   `yaml:"progress_interval"`
	Publisher        PublisherConfig `yaml:"publisher"`
	// EventTime (keys timestamp and timezone) says how a line's record
	// time is found: timestamp auto (the default) finds the timestamp a
	// line starts with, a layout name (internal/eventtime) takes only that
	// layout, none stamps every line with its read time; timezone (default
	// UTC) is the zone of timestamps written without one. See stamper.
	EventTime eventtime.Config `yaml:",inline"`
	// Receivers are the network endpoints shippers send lines to (see
	// ReceiversConfig).
	Receivers ReceiversConfig `yaml:"receivers"`
}

// Size limits: a frame must fit the WAL's max message size (8 MiB by
// default) with its headers.
const (
	maxFrameBytesLimit = 7 << 20
	deadLetterPrefix   = 64 << 10
)

// Defaults returns c with unset fields set to their defaults.
func (c Config) Defaults() Config {
	if c.FrameMaxBytes == 0 {
		c.FrameMaxBytes = 1 << 20
	}
	if c.FrameMaxRecords == 0 {
		c.FrameMaxRecords = 4096
	}
	if c.Linger == 0 {
		c.Linger = 50 * time.Millisecond
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = 4 << 20
	}
	if c.PollInterval == 0 {
		c.PollInterval = 200 * time.Millisecond
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 2 * time.Minute
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = time.Second
	}
	c.Publisher = c.Publisher.Defaults()
	c.Receivers = c.Receivers.Defaults()
	if c.EventTime.Mode == "" {
		c.EventTime.Mode = eventtime.ModeAuto
	}
	if c.EventTime.Zone == "" {
		c.EventTime.Zone = "UTC"
	}
	return c
}

// Validate reports every problem with c (after Defaults). An empty Source
// is valid: the constructors derive it.
func (c Config) Validate() error {
	var errs []error
	if err := streams.CheckToken(c.Tenant); err != nil {
		errs = append(errs, fmt.Errorf("producer.tenant: %w", err))
	}
	if c.Source != "" {
		if err := streams.CheckToken(c.Source); err != nil {
			errs = append(errs, fmt.Errorf("producer.source: %w", err))
		}
	}
	if c.FrameMaxBytes < 1<<10 || c.FrameMaxBytes > maxFrameBytesLimit {
		errs = append(errs, fmt.Errorf("producer.frame_max_bytes %d: must be 1KiB to 7MiB", c.FrameMaxBytes))
	}
	if c.FrameMaxRecords < 1 {
		errs = append(errs, fmt.Errorf("producer.frame_max_records %d: must be at least 1", c.FrameMaxRecords))
	}
	if c.Linger < 0 {
		errs = append(errs, fmt.Errorf("producer.linger %s: must not be negative", c.Linger))
	}
	if c.MaxRecordBytes < 1 || c.MaxRecordBytes > maxFrameBytesLimit-1024 {
		errs = append(errs, fmt.Errorf("producer.max_record_bytes %d: must be 1 to 7MiB-1KiB", c.MaxRecordBytes))
	}
	if c.PollInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("producer.poll_interval %s: must be at least 1ms", c.PollInterval))
	}
	if c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) {
		errs = append(errs, fmt.Errorf("producer.rate %v: must be a finite number of lines per second, 0 or more", c.Rate))
	}
	if c.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("producer.start_timeout %s: must not be negative", c.StartTimeout))
	}
	if c.DrainTimeout < 0 {
		errs = append(errs, fmt.Errorf("producer.drain_timeout %s: must not be negative", c.DrainTimeout))
	}
	if c.ProgressInterval < 0 {
		errs = append(errs, fmt.Errorf("producer.progress_interval %s: must not be negative", c.ProgressInterval))
	}
	if err := c.Publisher.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Receivers.Validate(); err != nil {
		errs = append(errs, err)
	}
	// One key at a time, so that each error names its own key.
	if err := (eventtime.Config{Mode: c.EventTime.Mode}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("producer.%w", err))
	}
	if err := (eventtime.Config{Zone: c.EventTime.Zone}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("producer.%w", err))
	}
	return errors.Join(errs...)
}

// Deps are a line source's connections and instruments.
type Deps struct {
	JS jetstream.JetStream
	// Log nil discards.
	Log *slog.Logger
	// Registerer nil registers no metrics.
	Registerer prometheus.Registerer
}

// IngestSubject is the core NATS subject applications publish lines to for
// tenant; each message holds one or more '\n'-separated lines.
func IngestSubject(tenant string) string { return "quarry.ingest." + tenant }

// PositionKey is the key in streams.PositionsBucket of a line source's
// position: the decimal offset after its last acked frame.
func PositionKey(source string) string { return "producer." + source }

// baseKey holds a followed file's offset base: the logical offset of byte 0
// of the current file after a truncation or rotation.
func baseKey(source string) string { return "producer." + source + ".base" }

// linesMetrics are the line sources' collectors, shared by every source of
// a process.
type linesMetrics struct {
	lines, frames, bytes, deadLetters, skipped, unverified prometheus.Counter
	pub                                                    *PublisherMetrics
}

func newLinesMetrics(reg prometheus.Registerer) *linesMetrics {
	c := func(name, help string) prometheus.Counter {
		return promutil.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
	}
	return &linesMetrics{
		lines:       c("quarry_producer_lines_total", "Lines written to the WAL (acked)."),
		frames:      c("quarry_producer_frames_total", "Frames written to the WAL (acked)."),
		bytes:       c("quarry_producer_line_bytes_total", "Line bytes written to the WAL (acked)."),
		deadLetters: c("quarry_producer_dead_letters_total", "Lines dead-lettered (too long)."),
		skipped:     c("quarry_producer_recovered_lines_total", "Lines skipped on restart because the WAL already holds them."),
		unverified:  c("quarry_producer_unverified_restarts_total", "Restarts after a crash whose frames beyond the saved position may have been purged from the WAL (their lines may be written twice)."),
		pub:         NewPublisherMetrics(reg),
	}
}
