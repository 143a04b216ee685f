package encoder

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/streams"
)

// Config configures an encoder process. The zero value plus Defaults is a
// working configuration.
type Config struct {
	// Name identifies this encoder process; it must be a subject token of at
	// most 96 bytes. Default: <hostname>-<pid>. A random run token is always
	// appended (see Encoder.Instance), so a restarted process never reuses a
	// writer id of its previous life.
	Name string `yaml:"name"`
	// Workers is the number of workers in this process (default 1). Each
	// pulls from the shared consumer and flushes its own files.
	Workers int `yaml:"workers"`
	// TargetFileBytes flushes a worker's buffer when the encoded size of the
	// batches it holds reaches it (default 64 MiB). It measures the mined
	// batches as received (mined/2), so compressed Parquet files come out
	// smaller.
	TargetFileBytes int64 `yaml:"target_file_bytes"`
	// MaxBatches flushes a worker's buffer when it holds that many batches
	// (default 4096); it bounds the size of one report.
	MaxBatches int `yaml:"max_batches"`
	// MaxAge flushes a worker's buffer when its oldest batch was received
	// that long ago (default 5s).
	MaxAge time.Duration `yaml:"max_age"`
	// IdleFlush flushes a worker's buffer of at least IdleFlushBytes when
	// no batch came for that long (default 100ms; negative: never): the
	// input paused (a backlog drained, a burst ended), so waiting out
	// MaxAge would only delay the files, and the CPU that would encode
	// them sits idle meanwhile. A trickle (less than IdleFlushBytes per
	// MaxAge) is still gathered for MaxAge.
	IdleFlush time.Duration `yaml:"idle_flush"`
	// IdleFlushBytes is the least buffered input (as TargetFileBytes
	// measures it) IdleFlush flushes (default 1 MiB, about 13,000 lines
	// of quarry run's mined batches).
	IdleFlushBytes int64 `yaml:"idle_flush_bytes"`
	// AckWait of the shared consumer (default 30s). Workers send InProgress
	// every AckWait/3 for every batch they hold.
	AckWait time.Duration `yaml:"ack_wait"`
	// MaxAckPending of the shared consumer (default 65536): the batches all
	// encoders together may hold unacked.
	MaxAckPending int `yaml:"max_ack_pending"`
	// MaxDeliver of the shared consumer; -1 (default) is unlimited. A batch
	// that decodes is never dropped, so a limit only parks work.
	MaxDeliver int `yaml:"max_deliver"`
	// FetchBatch is the number of messages one pull asks for (default 256).
	FetchBatch int `yaml:"fetch_batch"`
	// FetchBytes bounds the bytes one pull asks for (default 16 MiB; raised
	// to the server's max payload, so that any one batch fits). Mined
	// batches run to a megabyte: 256 of them overran the client's pending
	// limit (64 MB), the client dropped them as a slow consumer and they
	// came back only after AckWait, stalling the lake for half a minute.
	FetchBytes int `yaml:"fetch_bytes"`
	// FetchWait bounds one pull request (default 1s).
	FetchWait time.Duration `yaml:"fetch_wait"`
	// MaxPendingReports is the number of reports a worker may have waiting
	// for a verdict before it stops fetching (default 8).
	MaxPendingReports int `yaml:"max_pending_reports"`
	// VerdictTimeout is how long a report may wait for its verdict before the
	// encoder logs loudly and reports not ready (default 2m). It keeps
	// waiting: the verdict is a pure function of the report stream.
	VerdictTimeout time.Duration `yaml:"verdict_timeout"`
	// VerdictPoll is how often a waiting report's verdict is also read
	// directly, in case a watch update was missed (default 2s).
	VerdictPoll time.Duration `yaml:"verdict_poll"`
	// UploadTimeout bounds one object store call (default 2m).
	UploadTimeout time.Duration `yaml:"upload_timeout"`
	// DrainTimeout bounds the shutdown: flush, upload, report and wait for
	// verdicts; whatever is still unacked then is nak'ed (default 30s).
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// TemplateWait bounds how long a flush waits for the text of a template
	// version its records use and no batch or template event has shown yet
	// (default 1m); after it the file is written in records v2, which needs
	// no text (see encodeRecords).
	TemplateWait time.Duration `yaml:"template_wait"`
	// HighCompressionBelow: a flush made by MaxAge or at the drain (not by
	// TargetFileBytes or MaxBatches) whose buffer holds fewer bytes than
	// HighCompressionBelow / Workers, in a process that used less than
	// half a core while the buffer filled (and, where the platform says,
	// whose threads waited for a CPU less than half as long as they ran:
	// a process other work starves is not idle), writes its records files at
	// zstd's best level (recfile.WithHighCompression, as compaction
	// rewrites them) instead of its default. Such a flush means the process takes
	// in less than HighCompressionBelow per MaxAge, a fraction of what it
	// can encode, so best's extra CPU (2.6 times the encode's) is spent
	// where the CPU is idle; a busy encoder flushes larger buffers and
	// keeps the default level. Default 2 MiB: 0.4 MB/s with the default
	// MaxAge, about 5,000 lines a second of mined batches (~78 bytes a
	// line in quarry run), where a saturated encoder of quarry run flushed
	// 12 to 30 MB; -1: never.
	HighCompressionBelow int64 `yaml:"high_compression_below"`
	// HighCompression picks when records files are written at zstd's best
	// level: "auto" (the default) as HighCompressionBelow says, "always"
	// every records file (the smallest files for 2.6 times the encode's
	// CPU: an import of old logs, a benchmark of sizes), "never" none
	// (as HighCompressionBelow -1).
	HighCompression string `yaml:"high_compression"`
}

// The values of Config.HighCompression.
const (
	HighCompressionAuto   = "auto"
	HighCompressionAlways = "always"
	HighCompressionNever  = "never"
)

// Defaults returns c with unset fields set to their defaults.
func (c Config) Defaults() Config {
	if c.Name == "" {
		c.Name = defaultName()
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.TargetFileBytes == 0 {
		c.TargetFileBytes = 64 << 20
	}
	if c.MaxBatches == 0 {
		c.MaxBatches = 4096
	}
	if c.MaxAge == 0 {
		c.MaxAge = 5 * time.Second
	}
	if c.IdleFlush == 0 {
		c.IdleFlush = 100 * time.Millisecond
	}
	if c.IdleFlushBytes == 0 {
		c.IdleFlushBytes = 1 << 20
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = 65536
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = -1
	}
	if c.FetchBatch == 0 {
		c.FetchBatch = 256
	}
	if c.FetchBytes == 0 {
		c.FetchBytes = 16 << 20
	}
	if c.FetchWait == 0 {
		c.FetchWait = time.Second
	}
	if c.MaxPendingReports == 0 {
		c.MaxPendingReports = 8
	}
	if c.VerdictTimeout == 0 {
		c.VerdictTimeout = 2 * time.Minute
	}
	if c.VerdictPoll == 0 {
		c.VerdictPoll = 2 * time.Second
	}
	if c.UploadTimeout == 0 {
		c.UploadTimeout = 2 * time.Minute
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.TemplateWait == 0 {
		c.TemplateWait = time.Minute
	}
	if c.HighCompressionBelow == 0 {
		c.HighCompressionBelow = 2 << 20
	}
	if c.HighCompression == "" {
		c.HighCompression = HighCompressionAuto
	}
	return c
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if err := streams.CheckToken(c.Name); err != nil {
		errs = append(errs, fmt.Errorf("encoder.name: %w", err))
	} else if len(c.Name) > 96 {
		errs = append(errs, fmt.Errorf("encoder.name %q: longer than 96 bytes", c.Name))
	}
	if c.Workers < 1 || c.Workers > 1024 {
		errs = append(errs, fmt.Errorf("encoder.workers %d: must be 1 to 1024", c.Workers))
	}
	if c.TargetFileBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("encoder.target_file_bytes %d: must be at least 1KiB", c.TargetFileBytes))
	}
	if c.MaxBatches < 1 || c.MaxBatches > 100000 {
		errs = append(errs, fmt.Errorf("encoder.max_batches %d: must be 1 to 100000", c.MaxBatches))
	}
	if c.MaxAge < time.Millisecond {
		errs = append(errs, fmt.Errorf("encoder.max_age %s: must be at least 1ms", c.MaxAge))
	}
	if c.IdleFlush > 0 && c.IdleFlush < time.Millisecond {
		errs = append(errs, fmt.Errorf("encoder.idle_flush %s: must be at least 1ms (negative: never)", c.IdleFlush))
	}
	if c.IdleFlushBytes < 1 {
		errs = append(errs, fmt.Errorf("encoder.idle_flush_bytes %d: must be positive", c.IdleFlushBytes))
	}
	if c.AckWait < time.Second {
		errs = append(errs, fmt.Errorf("encoder.ack_wait %s: must be at least 1s", c.AckWait))
	}
	if c.MaxAckPending < 1 {
		errs = append(errs, fmt.Errorf("encoder.max_ack_pending %d: must be positive", c.MaxAckPending))
	}
	if c.MaxDeliver < -1 || c.MaxDeliver == 0 || c.MaxDeliver == 1 {
		errs = append(errs, fmt.Errorf("encoder.max_deliver %d: must be -1 (unlimited) or at least 2", c.MaxDeliver))
	}
	if c.FetchBatch < 1 || c.FetchBatch > 10000 {
		errs = append(errs, fmt.Errorf("encoder.fetch_batch %d: must be 1 to 10000", c.FetchBatch))
	}
	if c.FetchBytes < 1<<20 || c.FetchBytes > 48<<20 {
		errs = append(errs, fmt.Errorf("encoder.fetch_bytes %d: must be 1 MiB to 48 MiB (below the client's 64 MB pending limit)", c.FetchBytes))
	}
	if c.FetchWait < 10*time.Millisecond || c.FetchWait > time.Minute {
		errs = append(errs, fmt.Errorf("encoder.fetch_wait %s: must be 10ms to 1m", c.FetchWait))
	}
	if c.MaxPendingReports < 1 {
		errs = append(errs, fmt.Errorf("encoder.max_pending_reports %d: must be positive", c.MaxPendingReports))
	}
	if c.VerdictTimeout < time.Second {
		errs = append(errs, fmt.Errorf("encoder.verdict_timeout %s: must be at least 1s", c.VerdictTimeout))
	}
	if c.VerdictPoll < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("encoder.verdict_poll %s: must be at least 10ms", c.VerdictPoll))
	}
	if c.UploadTimeout < time.Second {
		errs = append(errs, fmt.Errorf("encoder.upload_timeout %s: must be at least 1s", c.UploadTimeout))
	}
	if c.DrainTimeout < 0 {
		errs = append(errs, fmt.Errorf("encoder.drain_timeout %s: must not be negative", c.DrainTimeout))
	}
	if c.TemplateWait < 0 {
		errs = append(errs, fmt.Errorf("encoder.template_wait %s: must not be negative", c.TemplateWait))
	}
	if c.HighCompressionBelow < -1 {
		errs = append(errs, fmt.Errorf("encoder.high_compression_below %d: must be -1 (never) or positive", c.HighCompressionBelow))
	}
	switch c.HighCompression {
	case HighCompressionAuto, HighCompressionAlways, HighCompressionNever:
	default:
		errs = append(errs, fmt.Errorf("encoder.high_compression %q: must be auto, always or never", c.HighCompression))
	}
	if c.AckWait >= time.Second && c.MaxAge >= c.AckWait*10 {
		errs = append(errs, fmt.Errorf("encoder.max_age %s: must be below 10 × ack_wait (%s)", c.MaxAge, c.AckWait))
	}
	return errors.Join(errs...)
}

// Deps are the encoder's connections.
type Deps struct {
	JS    jetstream.JetStream
	Store objstore.Store
	// Log may be nil (discard).
	Log *slog.Logger
	// Registerer may be nil (metrics are kept but not registered).
	Registerer prometheus.Registerer
}

func defaultName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "encoder"
	}
	n := streams.SanitizeToken(h)
	if len(n) > 64 {
		n = n[:64]
	}
	return fmt.Sprintf("%s-%d", n, os.Getpid())
}
