package cdc

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/producer"
	"github.com/quarrylake/quarry/producer/sqlserver"
	"github.com/quarrylake/quarry/streams"
)

// DSNEnv is the environment variable that holds the SQL Server
// connection string of `quarry producer mssql`. It is never read from a
// file and never logged.
const DSNEnv = "QUARRY_MSSQL_DSN"

// Bootstrap modes of a capture instance (TableConfig.Bootstrap).
const (
	// BootstrapInitial snapshots the table when the stream has no saved
	// position, then streams. A purged position is an error.
	BootstrapInitial = "initial"
	// BootstrapNever never snapshots: without a saved position the
	// stream starts at the oldest change the change table holds. A purged
	// position is an error.
	BootstrapNever = "never"
	// BootstrapWhenNeeded snapshots when there is no saved position or
	// the saved position is purged (it is the policy that allows a
	// re-snapshot instead of ErrPurgedRange).
	BootstrapWhenNeeded = "when_needed"
)

// TableConfig is the per capture instance part of Config.
type TableConfig struct {
	// Text names the column(s) the miner mines (Record.Text). One column:
	// its value. Several: their values in the listed order joined by
	// TextSeparator, a NULL as the empty string. None: the whole row,
	// "name=value" for every captured column that is neither a key nor an
	// attribute, in column order, joined by a space (NULLs left out).
	Text []string `yaml:"text"`
	// TextSeparator joins several text columns (default " | ").
	TextSeparator string `yaml:"text_separator"`
	// Attrs are columns carried as attributes (Record.Attrs) after "_op",
	// "_lsn", "_seqval", "_cmd" and the key columns. A NULL is left out.
	Attrs []string `yaml:"attrs"`
	// Tenant of the frames (default: the capture instance name). It must be
	// a subject token (streams.CheckToken).
	Tenant string `yaml:"tenant"`
	// Bootstrap is initial (default), never or when_needed.
	Bootstrap string `yaml:"bootstrap"`
	// SkipUpdateBefore drops update-before images (operation 3); the
	// position still moves past them.
	SkipUpdateBefore bool `yaml:"skip_update_before"`
}

// Config configures `quarry producer mssql`: one stream per capture
// instance of one database.
type Config struct {
	// Database is the database name as it appears in subjects and keys
	// (streams.CDCSubject, "cdc.<db>.<ci>"); a subject token.
	Database string `yaml:"database"`
	// CaptureInstances lists the capture instances to stream with the
	// TableDefaults.
	CaptureInstances []string `yaml:"capture_instances"`
	// Tables maps capture instance names (matched ignoring case) to their
	// settings; unset fields come from TableDefaults. A capture instance may
	// be in both lists.
	Tables map[string]TableConfig `yaml:"tables"`
	// TableDefaults apply to every capture instance.
	TableDefaults TableConfig `yaml:"table_defaults"`

	// PollInterval is the wait between reads when a stream is caught up
	// (default 1s).
	PollInterval time.Duration `yaml:"poll_interval"`
	// PageSize bounds the changes one query returns (default 1000).
	PageSize int `yaml:"page_size"`
	// SnapshotChunk bounds the rows of one snapshot query (default 5000).
	SnapshotChunk int `yaml:"snapshot_chunk"`
	// SnapshotIsolation is how a bootstrap snapshot reads its table:
	// "snapshot" (default: one transaction at SNAPSHOT isolation, consistent
	// at the snapshot LSN; the database must allow it, ALTER DATABASE ...
	// SET ALLOW_SNAPSHOT_ISOLATION ON) or "read_committed" (each chunk its
	// own query: rows changed during the snapshot may come twice, in the
	// snapshot with a newer value and again as a change).
	SnapshotIsolation string `yaml:"snapshot_isolation"`
	// FrameRecords and FrameBytes bound one frame (defaults 1000 and 1 MiB;
	// FrameBytes must stay below the WAL's max message size).
	FrameRecords int `yaml:"frame_records"`
	FrameBytes   int `yaml:"frame_bytes"`
	// HeartbeatInterval is the most time between two progress facts of a
	// quiet stream (default 10s).
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// SchemaCheckInterval is how often a stream looks for a newer capture
	// instance of its table (default 30s).
	SchemaCheckInterval time.Duration `yaml:"schema_check_interval"`
	// RetryBackoff is the first wait after a transient error (source or
	// publish); it doubles up to MaxRetryBackoff (defaults 1s and 30s).
	RetryBackoff    time.Duration `yaml:"retry_backoff"`
	MaxRetryBackoff time.Duration `yaml:"max_retry_backoff"`
	// DrainTimeout bounds the wait for in-flight acks on shutdown (10s).
	DrainTimeout time.Duration `yaml:"drain_timeout"`

	// ServerTimeZone is the IANA zone of the server's clock, in which
	// cdc.lsn_time_mapping stores commit times (default UTC).
	ServerTimeZone string `yaml:"server_time_zone"`
	// MaxOpenConns bounds the SQL connection pool all streams share
	// (default 4).
	MaxOpenConns int `yaml:"max_open_conns"`
	// QueryTimeout bounds one SQL query (default 30s).
	QueryTimeout time.Duration `yaml:"query_timeout"`

	// Publisher bounds each stream's frame publisher (MaxInFlight default
	// 8 for CDC streams).
	Publisher producer.PublisherConfig `yaml:"publisher"`
	// NATS is the connection of the process.
	NATS natsutil.ConnConfig `yaml:"nats"`
}

// Defaults returns c with unset fields set to their defaults.
func (c Config) Defaults() Config {
	if c.TableDefaults.Bootstrap == "" {
		c.TableDefaults.Bootstrap = BootstrapInitial
	}
	if c.TableDefaults.TextSeparator == "" {
		c.TableDefaults.TextSeparator = " | "
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.PageSize == 0 {
		c.PageSize = 1000
	}
	if c.SnapshotChunk == 0 {
		c.SnapshotChunk = 5000
	}
	if c.SnapshotIsolation == "" {
		c.SnapshotIsolation = string(sqlserver.IsolationSnapshot)
	}
	if c.FrameRecords == 0 {
		c.FrameRecords = 1000
	}
	if c.FrameBytes == 0 {
		c.FrameBytes = 1 << 20
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 10 * time.Second
	}
	if c.SchemaCheckInterval == 0 {
		c.SchemaCheckInterval = 30 * time.Second
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = time.Second
	}
	if c.MaxRetryBackoff == 0 {
		c.MaxRetryBackoff = 30 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.ServerTimeZone == "" {
		c.ServerTimeZone = "UTC"
	}
	if c.MaxOpenConns == 0 {
		c.MaxOpenConns = 4
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = 30 * time.Second
	}
	if c.Publisher.MaxInFlight == 0 {
		c.Publisher.MaxInFlight = 8
	}
	c.Publisher = c.Publisher.Defaults()
	if c.NATS.URL == "" {
		c.NATS.URL = "nats://127.0.0.1:4222"
	}
	if c.NATS.Name == "" {
		c.NATS.Name = "quarry-producer-mssql"
	}
	return c
}

// Validate reports every problem with c (after Defaults).
func (c Config) Validate() error {
	var errs []error
	if err := streams.CheckToken(c.Database); err != nil {
		errs = append(errs, fmt.Errorf("mssql.database: %w", err))
	}
	names := c.Instances()
	if len(names) == 0 {
		errs = append(errs, errors.New("mssql: no capture instances (capture_instances or tables)"))
	}
	seen := map[string]bool{}
	for _, n := range c.CaptureInstances {
		if seen[strings.ToLower(n)] {
			errs = append(errs, fmt.Errorf("mssql.capture_instances: %q listed twice (names match ignoring case)", n))
		}
		seen[strings.ToLower(n)] = true
	}
	tseen := map[string]string{}
	for n := range c.Tables {
		if o, ok := tseen[strings.ToLower(n)]; ok {
			errs = append(errs, fmt.Errorf("mssql.tables: %q and %q are the same capture instance (names match ignoring case)", o, n))
		}
		tseen[strings.ToLower(n)] = n
	}
	for _, n := range names {
		if err := streams.CheckToken(n); err != nil {
			errs = append(errs, fmt.Errorf("mssql capture instance %q: %w", n, err))
		}
		t := c.TableConfig(n)
		if err := streams.CheckToken(t.Tenant); err != nil {
			errs = append(errs, fmt.Errorf("mssql.tables.%s.tenant: %w", n, err))
		}
		switch t.Bootstrap {
		case BootstrapInitial, BootstrapNever, BootstrapWhenNeeded:
		default:
			errs = append(errs, fmt.Errorf("mssql.tables.%s.bootstrap %q: must be initial, never or when_needed", n, t.Bootstrap))
		}
		for _, col := range append(append([]string(nil), t.Text...), t.Attrs...) {
			if strings.TrimSpace(col) == "" {
				errs = append(errs, fmt.Errorf("mssql.tables.%s: empty column name", n))
			}
		}
	}
	if c.PollInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("mssql.poll_interval %s: must be at least 10ms", c.PollInterval))
	}
	if c.PageSize < 1 || c.PageSize > 100000 {
		errs = append(errs, fmt.Errorf("mssql.page_size %d: must be 1 to 100000", c.PageSize))
	}
	if c.SnapshotChunk < 1 || c.SnapshotChunk > 1000000 {
		errs = append(errs, fmt.Errorf("mssql.snapshot_chunk %d: must be 1 to 1000000", c.SnapshotChunk))
	}
	switch sqlserver.SnapshotIsolation(c.SnapshotIsolation) {
	case sqlserver.IsolationSnapshot, sqlserver.IsolationReadCommitted:
	default:
		errs = append(errs, fmt.Errorf("mssql.snapshot_isolation %q: must be snapshot or read_committed", c.SnapshotIsolation))
	}
	if c.FrameRecords < 1 {
		errs = append(errs, fmt.Errorf("mssql.frame_records %d: must be at least 1", c.FrameRecords))
	}
	if c.FrameBytes < 4<<10 || c.FrameBytes > 64<<20 {
		errs = append(errs, fmt.Errorf("mssql.frame_bytes %d: must be 4KiB to 64MiB", c.FrameBytes))
	}
	if c.HeartbeatInterval < c.PollInterval {
		errs = append(errs, fmt.Errorf("mssql.heartbeat_interval %s: must be at least poll_interval %s", c.HeartbeatInterval, c.PollInterval))
	}
	if c.SchemaCheckInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("mssql.schema_check_interval %s: must be positive", c.SchemaCheckInterval))
	}
	if c.RetryBackoff <= 0 || c.MaxRetryBackoff < c.RetryBackoff {
		errs = append(errs, fmt.Errorf("mssql.retry_backoff %s / max_retry_backoff %s: must be positive and max >= first", c.RetryBackoff, c.MaxRetryBackoff))
	}
	if c.DrainTimeout <= 0 {
		errs = append(errs, fmt.Errorf("mssql.drain_timeout %s: must be positive", c.DrainTimeout))
	}
	if _, err := time.LoadLocation(c.ServerTimeZone); err != nil {
		errs = append(errs, fmt.Errorf("mssql.server_time_zone %q: %w", c.ServerTimeZone, err))
	}
	if c.MaxOpenConns < 1 {
		errs = append(errs, fmt.Errorf("mssql.max_open_conns %d: must be at least 1", c.MaxOpenConns))
	}
	if c.QueryTimeout < time.Second {
		errs = append(errs, fmt.Errorf("mssql.query_timeout %s: must be at least 1s", c.QueryTimeout))
	}
	if err := c.Publisher.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Instances is every configured capture instance: CaptureInstances in
// order, then the Tables keys not already listed (sorted ignoring case).
func (c Config) Instances() []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range c.CaptureInstances {
		if !seen[strings.ToLower(n)] {
			seen[strings.ToLower(n)] = true
			out = append(out, n)
		}
	}
	var rest []string
	for n := range c.Tables {
		if !seen[strings.ToLower(n)] {
			seen[strings.ToLower(n)] = true
			rest = append(rest, n)
		}
	}
	sortFold(rest)
	return append(out, rest...)
}

func sortFold(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && strings.ToLower(s[j]) < strings.ToLower(s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// TableConfig is the effective config of capture instance ci: its Tables
// entry (matched ignoring case) over TableDefaults, with the tenant
// defaulting to ci.
func (c Config) TableConfig(ci string) TableConfig {
	t := c.TableDefaults
	for n, o := range c.Tables {
		if !strings.EqualFold(n, ci) {
			continue
		}
		if len(o.Text) > 0 {
			t.Text = o.Text
		}
		if o.TextSeparator != "" {
			t.TextSeparator = o.TextSeparator
		}
		if len(o.Attrs) > 0 {
			t.Attrs = o.Attrs
		}
		if o.Tenant != "" {
			t.Tenant = o.Tenant
		}
		if o.Bootstrap != "" {
			t.Bootstrap = o.Bootstrap
		}
		if o.SkipUpdateBefore {
			t.SkipUpdateBefore = true
		}
	}
	if t.Tenant == "" {
		t.Tenant = ci
	}
	if t.Bootstrap == "" {
		t.Bootstrap = BootstrapInitial
	}
	if t.TextSeparator == "" {
		t.TextSeparator = " | "
	}
	return t
}

// SourceOptions are the sqlserver.Options c implies.
func (c Config) SourceOptions() sqlserver.Options {
	loc, err := time.LoadLocation(c.ServerTimeZone)
	if err != nil {
		loc = time.UTC
	}
	return sqlserver.Options{ServerTimeZone: loc, QueryTimeout: c.QueryTimeout, MaxOpenConns: c.MaxOpenConns}
}
