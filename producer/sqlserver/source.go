// Package sqlserver is quarry's access to SQL Server change data capture:
// LSNs and positions, the queries against the cdc schema, the conversion of
// go-mssqldb's driver values to attribute strings, and the Source interface
// the CDC streams read through. DB implements Source over database/sql and
// github.com/microsoft/go-mssqldb; package memsource implements it in memory
// for tests.
package sqlserver

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Column is a captured column: its name and SQL Server type name (as in
// cdc.captured_columns.column_type, e.g. "nvarchar", "datetime2").
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// CaptureInstance describes one CDC capture instance (a row of
// cdc.change_tables with its columns).
type CaptureInstance struct {
	Name         string
	SourceSchema string
	SourceTable  string
	// StartLSN is the low-water mark of the change table: what
	// sys.fn_cdc_get_min_lsn returns. The cleanup job moves it forward.
	StartLSN   LSN
	CreateDate time.Time
	// Columns are the captured columns in column ordinal order.
	Columns []Column
	// KeyColumns are the columns of the unique index CDC uses to identify
	// rows (cdc.index_columns, in index order); empty when the table has
	// none.
	KeyColumns []string
}

// Table is the quoted two-part name of the source table, e.g. "[dbo].[orders]".
func (ci CaptureInstance) Table() string {
	return QuoteIdent(ci.SourceSchema) + "." + QuoteIdent(ci.SourceTable)
}

// SameTable reports whether ci and o capture the same source table.
func (ci CaptureInstance) SameTable(o CaptureInstance) bool {
	return strings.EqualFold(ci.SourceSchema, o.SourceSchema) && strings.EqualFold(ci.SourceTable, o.SourceTable)
}

// ColumnIndex is the index of the captured column name (case-insensitive),
// or -1.
func (ci CaptureInstance) ColumnIndex(name string) int {
	for i, c := range ci.Columns {
		if strings.EqualFold(c.Name, name) {
			return i
		}
	}
	return -1
}

// Change is one row of a change table.
type Change struct {
	// Pos is the change's key (TxEnd false).
	Pos Position
	// CommitTime is tran_end_time of __$start_lsn in cdc.lsn_time_mapping,
	// in the server's time zone (Options.ServerTimeZone); zero if unmapped.
	CommitTime time.Time
	// Values are the captured columns, in CaptureInstance.Columns order.
	Values []Value
}

// Row is one row of a snapshot chunk.
type Row struct {
	// Key holds the key column values as query parameters for the next
	// chunk (see KeyPart to persist them).
	Key []any
	// Values are the captured columns, in CaptureInstance.Columns order.
	Values []Value
}

// Source is everything a CDC stream needs from SQL Server. Implementations
// must be safe for concurrent use by many streams. Every method honours
// ctx and fails rather than blocking forever.
type Source interface {
	// MaxLSN is sys.fn_cdc_get_max_lsn(): every change committed at or
	// before it is in the change tables.
	MaxLSN(ctx context.Context) (LSN, error)
	// MinLSN is sys.fn_cdc_get_min_lsn(ci); ErrNoCaptureInstance if ci does
	// not exist.
	MinLSN(ctx context.Context, ci string) (LSN, error)
	// CaptureInstances lists every capture instance of the database.
	CaptureInstances(ctx context.Context) ([]CaptureInstance, error)
	// Changes returns at most limit changes of ci after from and at or
	// before to, in (start LSN, command id, seqval, operation) order.
	Changes(ctx context.Context, ci CaptureInstance, from Position, to LSN, limit int) ([]Change, error)
	// CommitTime is the commit time of the newest transaction at or before
	// lsn (tran_end_time in cdc.lsn_time_mapping); zero if there is none.
	CommitTime(ctx context.Context, lsn LSN) (time.Time, error)
	// BeginSnapshot opens a snapshot of ci's source table. With
	// IsolationSnapshot the handle reads the table as of its LSN (one
	// transaction at SNAPSHOT isolation on a connection held until Close);
	// if the database does not allow it, the error wraps
	// ErrSnapshotIsolation. With IsolationReadCommitted each chunk is its
	// own READ COMMITTED query and the LSN is only a lower bound (rows may
	// be newer). ErrNoKey if the table has no unique index. The handle is
	// not bound to ctx: the caller must Close it.
	BeginSnapshot(ctx context.Context, ci CaptureInstance, iso SnapshotIsolation) (Snapshot, error)
}

// Snapshot is an open snapshot of one table (Source.BeginSnapshot). It is
// used by one goroutine at a time.
type Snapshot interface {
	// LSN is sys.fn_cdc_get_max_lsn() as the snapshot sees it: with
	// IsolationSnapshot every change at or before it is in the image and
	// no change committed after the image was taken is at or before it.
	LSN() LSN
	// CommitTime is the commit time of LSN (see Source.CommitTime).
	CommitTime() time.Time
	// Chunk returns at most limit rows with a key after the key after
	// (nil: from the start), in key order, as of the snapshot.
	Chunk(ctx context.Context, after []any, limit int) ([]Row, error)
	// Close ends the snapshot (rolls the transaction back and returns the
	// connection). It is safe to call more than once.
	Close() error
}

// SnapshotIsolation is how a snapshot reads the table.
type SnapshotIsolation string

// Snapshot isolation modes.
const (
	// IsolationSnapshot reads the whole table in one transaction at
	// SNAPSHOT isolation: consistent at the snapshot's LSN. It needs
	// ALTER DATABASE ... SET ALLOW_SNAPSHOT_ISOLATION ON.
	IsolationSnapshot SnapshotIsolation = "snapshot"
	// IsolationReadCommitted reads each chunk in its own READ COMMITTED
	// query: rows changed while the snapshot runs may be read with a value
	// newer than the LSN (and then also arrive as a change after it).
	IsolationReadCommitted SnapshotIsolation = "read_committed"
)

// ErrSnapshotIsolation reports a database that does not allow SNAPSHOT
// isolation (sys.databases.snapshot_isolation_state is not ON).
var ErrSnapshotIsolation = errors.New("snapshot isolation is not allowed in the database")

// ErrNoCaptureInstance reports a capture instance that does not exist.
var ErrNoCaptureInstance = errors.New("no such capture instance")

// ErrNoKey reports a snapshot of a table without a unique index.
var ErrNoKey = errors.New("table has no primary key or unique index to chunk a snapshot by")

// QuoteIdent quotes a SQL Server identifier with brackets.
func QuoteIdent(s string) string { return "[" + strings.ReplaceAll(s, "]", "]]") + "]" }
