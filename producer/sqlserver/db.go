package sqlserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	mssql "github.com/microsoft/go-mssqldb"
	"github.com/microsoft/go-mssqldb/msdsn"
)

// Options configure DB.
type Options struct {
	// ServerTimeZone is the zone of cdc.lsn_time_mapping's tran_end_time
	// (a datetime in the server's local time); nil means UTC.
	ServerTimeZone *time.Location
	// QueryTimeout bounds each query whose ctx has no deadline (default 30s).
	QueryTimeout time.Duration
	// MaxOpenConns bounds the pool (default 4). Streams share it: a stream
	// holds a connection only while a query runs.
	MaxOpenConns int
}

// DB is a Source over database/sql and go-mssqldb.
type DB struct {
	db  *sql.DB
	o   Options
	fmt FormatOptions
	// snapSem bounds the connections held by snapshots to MaxOpenConns-1
	// (at least 1), so other streams keep one.
	snapSem chan struct{}
}

// Open opens a pool on the go-mssqldb connection string dsn (URL or ADO
// form) and checks it with a ping. The dsn is never logged or returned in
// an error.
func Open(ctx context.Context, dsn string, o Options) (*DB, error) {
	cfg, err := msdsn.Parse(dsn)
	if err != nil {
		return nil, errors.New("sqlserver connection string: does not parse (value not shown)")
	}
	conn, err := mssql.NewConnector(dsn)
	if err != nil {
		return nil, errors.New("sqlserver connection string: connector rejects it (value not shown)")
	}
	db := sql.OpenDB(conn)
	d := NewDB(db, o, FormatOptions{GUIDConversion: cfg.Encoding.GuidConversion})
	pctx, cancel := d.timeout(ctx)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlserver %s: ping: %w", cfg.Host, err)
	}
	return d, nil
}

// NewDB wraps an open pool.
func NewDB(db *sql.DB, o Options, f FormatOptions) *DB {
	if o.ServerTimeZone == nil {
		o.ServerTimeZone = time.UTC
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = 30 * time.Second
	}
	if o.MaxOpenConns <= 0 {
		o.MaxOpenConns = 4
	}
	db.SetMaxOpenConns(o.MaxOpenConns)
	db.SetMaxIdleConns(o.MaxOpenConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return &DB{db: db, o: o, fmt: f, snapSem: make(chan struct{}, max(1, o.MaxOpenConns-1))}
}

// Close closes the pool. Close open snapshots first.
func (d *DB) Close() error { return d.db.Close() }

func (d *DB) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d.o.QueryTimeout)
}

// Query texts. They are constants or built by the functions below, and are
// tested verbatim.
const (
	QueryMaxLSN = `SELECT sys.fn_cdc_get_max_lsn()`
	QueryMinLSN = `SELECT sys.fn_cdc_get_min_lsn(@ci), ` +
		`CASE WHEN EXISTS (SELECT 1 FROM cdc.change_tables WHERE capture_instance = @ci) THEN 1 ELSE 0 END`
	QueryCommitTime = `SELECT TOP (1) tran_end_time FROM cdc.lsn_time_mapping ` +
		`WHERE start_lsn <= @lsn AND tran_end_time IS NOT NULL ORDER BY start_lsn DESC`
	QueryCaptureInstances = `SELECT ct.capture_instance, s.name, t.name, ct.start_lsn, ct.create_date ` +
		`FROM cdc.change_tables AS ct ` +
		`JOIN sys.tables AS t ON t.object_id = ct.source_object_id ` +
		`JOIN sys.schemas AS s ON s.schema_id = t.schema_id ` +
		`ORDER BY ct.create_date, ct.capture_instance`
	QueryCapturedColumns = `SELECT ct.capture_instance, cc.column_name, cc.column_type ` +
		`FROM cdc.captured_columns AS cc JOIN cdc.change_tables AS ct ON ct.object_id = cc.object_id ` +
		`ORDER BY ct.capture_instance, cc.column_ordinal`
	QueryIndexColumns = `SELECT ct.capture_instance, ic.column_name ` +
		`FROM cdc.index_columns AS ic JOIN cdc.change_tables AS ct ON ct.object_id = ic.object_id ` +
		`ORDER BY ct.capture_instance, ic.index_ordinal`
)

// MaxLSN implements Source.
func (d *DB) MaxLSN(ctx context.Context) (LSN, error) {
	ctx, cancel := d.timeout(ctx)
	defer cancel()
	var l LSN
	if err := d.db.QueryRowContext(ctx, QueryMaxLSN).Scan(&l); err != nil {
		return l, fmt.Errorf("sys.fn_cdc_get_max_lsn: %w", err)
	}
	return l, nil
}

// MinLSN implements Source.
func (d *DB) MinLSN(ctx context.Context, ci string) (LSN, error) {
	ctx, cancel := d.timeout(ctx)
	defer cancel()
	var l LSN
	var exists int
	if err := d.db.QueryRowContext(ctx, QueryMinLSN, sql.Named("ci", ci)).Scan(&l, &exists); err != nil {
		return l, fmt.Errorf("sys.fn_cdc_get_min_lsn(%s): %w", ci, err)
	}
	if exists == 0 {
		return l, fmt.Errorf("%w: %s", ErrNoCaptureInstance, ci)
	}
	return l, nil
}

// CommitTime implements Source.
func (d *DB) CommitTime(ctx context.Context, lsn LSN) (time.Time, error) {
	ctx, cancel := d.timeout(ctx)
	defer cancel()
	var t time.Time
	err := d.db.QueryRowContext(ctx, QueryCommitTime, sql.Named("lsn", lsn)).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return t, fmt.Errorf("commit time of %s: %w", lsn, err)
	}
	return d.serverTime(t), nil
}

// serverTime reinterprets a datetime read as UTC wall clock in the server's
// zone.
func (d *DB) serverTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), d.o.ServerTimeZone)
}

// CaptureInstances implements Source.
func (d *DB) CaptureInstances(ctx context.Context) ([]CaptureInstance, error) {
	ctx, cancel := d.timeout(ctx)
	defer cancel()
	rows, err := d.db.QueryContext(ctx, QueryCaptureInstances)
	if err != nil {
		return nil, fmt.Errorf("list capture instances: %w", err)
	}
	var out []CaptureInstance
	idx := map[string]int{}
	for rows.Next() {
		var ci CaptureInstance
		if err := rows.Scan(&ci.Name, &ci.SourceSchema, &ci.SourceTable, &ci.StartLSN, &ci.CreateDate); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list capture instances: %w", err)
		}
		idx[ci.Name] = len(out)
		out = append(out, ci)
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("list capture instances: %w", err)
	}
	if err := d.eachPair(ctx, QueryCapturedColumns, 3, func(ci string, v []string) {
		if i, ok := idx[ci]; ok {
			out[i].Columns = append(out[i].Columns, Column{Name: v[0], Type: v[1]})
		}
	}); err != nil {
		return nil, fmt.Errorf("list captured columns: %w", err)
	}
	if err := d.eachPair(ctx, QueryIndexColumns, 2, func(ci string, v []string) {
		if i, ok := idx[ci]; ok {
			out[i].KeyColumns = append(out[i].KeyColumns, v[0])
		}
	}); err != nil {
		return nil, fmt.Errorf("list index columns: %w", err)
	}
	return out, nil
}

func (d *DB) eachPair(ctx context.Context, q string, n int, f func(string, []string)) error {
	rows, err := d.db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	vals := make([]string, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			rows.Close()
			return err
		}
		f(vals[0], append([]string(nil), vals[1:]...))
	}
	return closeRows(rows)
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// selectColumns is the select list of the captured columns with the given
// table alias: each column, and for a sql_variant column also its base
// type.
func selectColumns(alias string, cols []Column) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		q := alias + "." + QuoteIdent(c.Name)
		b.WriteString(q)
		if isVariant(c.Type) {
			b.WriteString(", CAST(SQL_VARIANT_PROPERTY(" + q + ", 'BaseType') AS nvarchar(128))")
		}
	}
	return b.String()
}

func isVariant(t string) bool { return strings.EqualFold(t, "sql_variant") }

// ChangesQuery is the text of the Changes query for ci. Parameters: @limit,
// @lsn, @to and, unless txEnd, @cmd, @seqval, @op. It reads the change
// table cdc.<ci>_CT directly (fn_cdc_get_all_changes_<ci> raises error 313
// for a range below the low-water mark and cannot be paged by key), joins
// the commit time, and bounds the page to the LSNs of its first @limit rows
// so that the sort by (command id, seqval, operation) touches about one
// page of rows, not the whole backlog.
func ChangesQuery(ci CaptureInstance, txEnd bool) string {
	ct := "cdc." + QuoteIdent(ci.Name+"_CT")
	lower := "ct.__$start_lsn > @lsn"
	lowerW := "w.__$start_lsn > @lsn"
	if !txEnd {
		lower = "(ct.__$start_lsn > @lsn OR (ct.__$start_lsn = @lsn AND (ct.__$command_id > @cmd OR " +
			"(ct.__$command_id = @cmd AND (ct.__$seqval > @seqval OR (ct.__$seqval = @seqval AND ct.__$operation > @op))))))"
		lowerW = "w.__$start_lsn >= @lsn"
	}
	cols := ""
	if len(ci.Columns) > 0 {
		cols = ", " + selectColumns("ct", ci.Columns)
	}
	return "SELECT TOP (@limit) ct.__$start_lsn, ct.__$command_id, ct.__$seqval, ct.__$operation, m.tran_end_time" + cols +
		" FROM " + ct + " AS ct" +
		" LEFT JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = ct.__$start_lsn" +
		" WHERE " + lower +
		" AND ct.__$start_lsn <= (SELECT MAX(p.__$start_lsn) FROM (SELECT TOP (@limit) w.__$start_lsn FROM " + ct + " AS w" +
		" WHERE " + lowerW + " AND w.__$start_lsn <= @to ORDER BY w.__$start_lsn) AS p)" +
		" ORDER BY ct.__$start_lsn, ct.__$command_id, ct.__$seqval, ct.__$operation"
}

// ChangesArgs are the named parameters of ChangesQuery.
func ChangesArgs(from Position, to LSN, limit int) []any {
	args := []any{sql.Named("limit", limit), sql.Named("lsn", from.LSN), sql.Named("to", to)}
	if !from.TxEnd {
		args = append(args, sql.Named("cmd", from.CommandID), sql.Named("seqval", from.SeqVal), sql.Named("op", int(from.Op)))
	}
	return args
}

// Changes implements Source.
func (d *DB) Changes(ctx context.Context, ci CaptureInstance, from Position, to LSN, limit int) ([]Change, error) {
	if to.Compare(from.LSN) < 0 || (from.TxEnd && to == from.LSN) {
		return nil, nil
	}
	ctx, cancel := d.timeout(ctx)
	defer cancel()
	rows, err := d.db.QueryContext(ctx, ChangesQuery(ci, from.TxEnd), ChangesArgs(from, to, limit)...)
	if err != nil {
		return nil, fmt.Errorf("changes of %s after %s: %w", ci.Name, from, err)
	}
	n := 5 + len(ci.Columns) + countVariants(ci.Columns)
	raw := make([]any, n)
	ptrs := make([]any, n)
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	var out []Change
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			rows.Close()
			return nil, fmt.Errorf("changes of %s: %w", ci.Name, err)
		}
		c, err := d.decodeChange(ci, raw)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("changes of %s: %w", ci.Name, err)
		}
		out = append(out, c)
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("changes of %s: %w", ci.Name, err)
	}
	return out, nil
}

func countVariants(cols []Column) int {
	n := 0
	for _, c := range cols {
		if isVariant(c.Type) {
			n++
		}
	}
	return n
}

// DecodeChangeRow decodes one scanned row of ChangesQuery (driver values
// in select-list order).
func DecodeChangeRow(ci CaptureInstance, raw []any, o FormatOptions, zone *time.Location) (Change, error) {
	d := &DB{o: Options{ServerTimeZone: zone}, fmt: o}
	if zone == nil {
		d.o.ServerTimeZone = time.UTC
	}
	return d.decodeChange(ci, raw)
}

func (d *DB) decodeChange(ci CaptureInstance, raw []any) (Change, error) {
	var c Change
	var err error
	if err = c.Pos.LSN.Scan(raw[0]); err != nil {
		return c, fmt.Errorf("__$start_lsn: %w", err)
	}
	cmd, ok := raw[1].(int64)
	if !ok && raw[1] != nil {
		return c, fmt.Errorf("__$command_id: %T", raw[1])
	}
	c.Pos.CommandID = cmd
	if err = c.Pos.SeqVal.Scan(raw[2]); err != nil {
		return c, fmt.Errorf("__$seqval: %w", err)
	}
	op, _ := raw[3].(int64)
	if c.Pos.Op, err = ParseOperation(op); err != nil {
		return c, err
	}
	if t, ok := raw[4].(time.Time); ok {
		c.CommitTime = d.serverTime(t)
	}
	c.Values, err = d.decodeValues(ci.Columns, raw[5:])
	return c, err
}

func (d *DB) decodeValues(cols []Column, raw []any) ([]Value, error) {
	out := make([]Value, len(cols))
	j := 0
	for i, c := range cols {
		if j >= len(raw) {
			return nil, fmt.Errorf("row has %d values for %d columns", len(raw), len(cols))
		}
		if isVariant(c.Type) {
			base, _ := raw[j+1].(string)
			out[i] = FormatVariant(base, raw[j], d.fmt)
			j += 2
			continue
		}
		out[i] = FormatValue(c.Type, raw[j], d.fmt)
		j++
	}
	return out, nil
}

// SnapshotQuery is the text of a snapshot chunk of ci: the key columns,
// then the captured columns, of the rows after @k1..@kn in key order.
func SnapshotQuery(ci CaptureInstance, first bool) string {
	var b strings.Builder
	b.WriteString("SELECT TOP (@limit) ")
	for i, k := range ci.KeyColumns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("t." + QuoteIdent(k))
	}
	if len(ci.Columns) > 0 {
		b.WriteString(", " + selectColumns("t", ci.Columns))
	}
	b.WriteString(" FROM " + ci.Table() + " AS t")
	if !first {
		// (k1 > @k1) OR (k1 = @k1 AND k2 > @k2) OR ...
		b.WriteString(" WHERE ")
		for i := range ci.KeyColumns {
			if i > 0 {
				b.WriteString(" OR ")
			}
			b.WriteString("(")
			for j := 0; j < i; j++ {
				fmt.Fprintf(&b, "t.%s = @k%d AND ", QuoteIdent(ci.KeyColumns[j]), j+1)
			}
			fmt.Fprintf(&b, "t.%s > @k%d)", QuoteIdent(ci.KeyColumns[i]), i+1)
		}
	}
	b.WriteString(" ORDER BY ")
	for i, k := range ci.KeyColumns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("t." + QuoteIdent(k))
	}
	return b.String()
}

// SnapshotArgs are the named parameters of SnapshotQuery.
func SnapshotArgs(after []any, limit int) []any {
	args := []any{sql.Named("limit", limit)}
	for i, v := range after {
		args = append(args, sql.Named(fmt.Sprintf("k%d", i+1), v))
	}
	return args
}

// Query texts of BeginSnapshot (IsolationSnapshot).
const (
	// QuerySnapshotIsolationState reads whether the database allows
	// SNAPSHOT isolation (1 = ON).
	QuerySnapshotIsolationState = `SELECT name, snapshot_isolation_state FROM sys.databases WHERE database_id = DB_ID()`
	// QueryResetIsolation runs on the snapshot's connection after the
	// rollback, before it goes back to the pool.
	QueryResetIsolation = `SET TRANSACTION ISOLATION LEVEL READ COMMITTED`
)

// BeginSnapshot implements Source.
//
// With IsolationSnapshot it takes a dedicated connection from the pool,
// checks sys.databases.snapshot_isolation_state, begins a transaction at
// SNAPSHOT isolation and runs sys.fn_cdc_get_max_lsn() as its first
// statement. SQL Server fixes a snapshot transaction's view at its first
// statement that reads data, not at BEGIN TRAN, so that statement both
// fixes the view and reads the max LSN L from cdc.lsn_time_mapping inside
// it: every change at or before L is in the view (it was committed before
// the capture job harvested it), and every change after L is either
// committed after the view was fixed or was committed before but not yet
// harvested (the capture job's lag). Only the latter is in both the image
// and the changes after L. The commit time of L is read in the same
// transaction, and every Chunk runs in it; the connection is held until
// Close. database/sql's ReadOnly option is not used: go-mssqldb rejects
// it.
func (d *DB) BeginSnapshot(ctx context.Context, ci CaptureInstance, iso SnapshotIsolation) (Snapshot, error) {
	if len(ci.KeyColumns) == 0 {
		return nil, fmt.Errorf("snapshot %s: %w", ci.Table(), ErrNoKey)
	}
	switch iso {
	case IsolationReadCommitted:
		l, err := d.MaxLSN(ctx)
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", ci.Table(), err)
		}
		at, err := d.CommitTime(ctx, l)
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", ci.Table(), err)
		}
		return &dbSnapshot{d: d, ci: ci, q: d.db, lsn: l, at: at}, nil
	case IsolationSnapshot:
	default:
		return nil, fmt.Errorf("snapshot %s: unknown isolation %q", ci.Table(), iso)
	}
	// Wait (as long as ctx allows) for a turn to hold a connection.
	select {
	case d.snapSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("snapshot %s: waiting for a connection: %w", ci.Table(), ctx.Err())
	}
	release := func() { <-d.snapSem }
	qctx, cancel := d.timeout(ctx)
	defer cancel()
	conn, err := d.db.Conn(qctx)
	if err != nil {
		release()
		return nil, fmt.Errorf("snapshot %s: connection: %w", ci.Table(), err)
	}
	var name string
	var state int64
	if err := conn.QueryRowContext(qctx, QuerySnapshotIsolationState).Scan(&name, &state); err != nil {
		conn.Close()
		release()
		return nil, fmt.Errorf("snapshot %s: snapshot_isolation_state: %w", ci.Table(), err)
	}
	if state != 1 {
		conn.Close()
		release()
		return nil, fmt.Errorf("snapshot %s: %w: database %s has snapshot_isolation_state %d (1 is ON); "+
			"run ALTER DATABASE %s SET ALLOW_SNAPSHOT_ISOLATION ON, or set snapshot_isolation: read_committed "+
			"to accept rows changed during the snapshot twice",
			ci.Table(), ErrSnapshotIsolation, name, state, QuoteIdent(name))
	}
	// The transaction lives until Close, not until ctx ends.
	txCtx, txCancel := context.WithCancel(context.WithoutCancel(ctx))
	tx, err := conn.BeginTx(txCtx, &sql.TxOptions{Isolation: sql.LevelSnapshot})
	if err != nil {
		txCancel()
		conn.Close()
		release()
		return nil, fmt.Errorf("snapshot %s: begin snapshot transaction: %w", ci.Table(), err)
	}
	s := &dbSnapshot{d: d, ci: ci, q: tx, tx: tx, conn: conn, cancel: txCancel, release: release}
	if err := tx.QueryRowContext(qctx, QueryMaxLSN).Scan(&s.lsn); err != nil {
		s.Close()
		return nil, fmt.Errorf("snapshot %s: sys.fn_cdc_get_max_lsn: %w", ci.Table(), err)
	}
	var t time.Time
	err = tx.QueryRowContext(qctx, QueryCommitTime, sql.Named("lsn", s.lsn)).Scan(&t)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		s.Close()
		return nil, fmt.Errorf("snapshot %s: commit time of %s: %w", ci.Table(), s.lsn, err)
	}
	s.at = d.serverTime(t)
	return s, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// dbSnapshot is DB's Snapshot: q is the transaction (IsolationSnapshot)
// or the pool (IsolationReadCommitted).
type dbSnapshot struct {
	d       *DB
	ci      CaptureInstance
	q       querier
	tx      *sql.Tx
	conn    *sql.Conn
	cancel  context.CancelFunc
	release func()
	lsn     LSN
	at      time.Time
	closed  bool
}

func (s *dbSnapshot) LSN() LSN              { return s.lsn }
func (s *dbSnapshot) CommitTime() time.Time { return s.at }

func (s *dbSnapshot) Close() error {
	if s.closed || s.tx == nil {
		s.closed = true
		return nil
	}
	s.closed = true
	err := s.tx.Rollback()
	if errors.Is(err, sql.ErrTxDone) {
		err = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, rerr := s.conn.ExecContext(ctx, QueryResetIsolation); rerr != nil && err == nil {
		err = rerr
	}
	if cerr := s.conn.Close(); cerr != nil && err == nil {
		err = cerr
	}
	s.cancel()
	s.release()
	if err != nil {
		return fmt.Errorf("snapshot %s: close: %w", s.ci.Table(), err)
	}
	return nil
}

// Chunk implements Snapshot.
func (s *dbSnapshot) Chunk(ctx context.Context, after []any, limit int) ([]Row, error) {
	if s.closed {
		return nil, fmt.Errorf("snapshot %s: closed", s.ci.Table())
	}
	return s.d.chunk(ctx, s.q, s.ci, after, limit)
}

func (d *DB) chunk(ctx context.Context, q querier, ci CaptureInstance, after []any, limit int) ([]Row, error) {
	if len(ci.KeyColumns) == 0 {
		return nil, fmt.Errorf("snapshot %s: %w", ci.Table(), ErrNoKey)
	}
	if after != nil && len(after) != len(ci.KeyColumns) {
		return nil, fmt.Errorf("snapshot %s: %d key values for %d key columns", ci.Table(), len(after), len(ci.KeyColumns))
	}
	ctx, cancel := d.timeout(ctx)
	defer cancel()
	rows, err := q.QueryContext(ctx, SnapshotQuery(ci, after == nil), SnapshotArgs(after, limit)...)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", ci.Table(), err)
	}
	nk := len(ci.KeyColumns)
	n := nk + len(ci.Columns) + countVariants(ci.Columns)
	raw := make([]any, n)
	ptrs := make([]any, n)
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	var out []Row
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			rows.Close()
			return nil, fmt.Errorf("snapshot %s: %w", ci.Table(), err)
		}
		r := Row{Key: make([]any, nk)}
		for i, k := range ci.KeyColumns {
			typ := ""
			if j := ci.ColumnIndex(k); j >= 0 {
				typ = ci.Columns[j].Type
			}
			r.Key[i] = KeyParam(typ, raw[i], d.fmt)
		}
		if r.Values, err = d.decodeValues(ci.Columns, raw[nk:]); err != nil {
			rows.Close()
			return nil, fmt.Errorf("snapshot %s: %w", ci.Table(), err)
		}
		out = append(out, r)
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", ci.Table(), err)
	}
	return out, nil
}

var _ Source = (*DB)(nil)
