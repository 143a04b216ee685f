package sqlserver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

func testCI() CaptureInstance {
	return CaptureInstance{
		Name: "dbo_orders", SourceSchema: "dbo", SourceTable: "orders",
		Columns:    []Column{{"id", "int"}, {"msg", "nvarchar"}, {"v", "sql_variant"}, {"odd]name", "uniqueidentifier"}},
		KeyColumns: []string{"id"},
	}
}

func TestChangesQueryText(t *testing.T) {
	ci := testCI()
	want := "SELECT TOP (@limit) ct.__$start_lsn, ct.__$command_id, ct.__$seqval, ct.__$operation, m.tran_end_time, " +
		"ct.[id], ct.[msg], ct.[v], CAST(SQL_VARIANT_PROPERTY(ct.[v], 'BaseType') AS nvarchar(128)), ct.[odd]]name] " +
		"FROM cdc.[dbo_orders_CT] AS ct LEFT JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = ct.__$start_lsn " +
		"WHERE (ct.__$start_lsn > @lsn OR (ct.__$start_lsn = @lsn AND (ct.__$command_id > @cmd OR (ct.__$command_id = @cmd AND " +
		"(ct.__$seqval > @seqval OR (ct.__$seqval = @seqval AND ct.__$operation > @op)))))) " +
		"AND ct.__$start_lsn <= (SELECT MAX(p.__$start_lsn) FROM (SELECT TOP (@limit) w.__$start_lsn FROM cdc.[dbo_orders_CT] AS w " +
		"WHERE w.__$start_lsn >= @lsn AND w.__$start_lsn <= @to ORDER BY w.__$start_lsn) AS p) " +
		"ORDER BY ct.__$start_lsn, ct.__$command_id, ct.__$seqval, ct.__$operation"
	if got := ChangesQuery(ci, false); got != want {
		t.Errorf("mid-transaction query:\n got %s\nwant %s", got, want)
	}
	wantEnd := "SELECT TOP (@limit) ct.__$start_lsn, ct.__$command_id, ct.__$seqval, ct.__$operation, m.tran_end_time, " +
		"ct.[id], ct.[msg], ct.[v], CAST(SQL_VARIANT_PROPERTY(ct.[v], 'BaseType') AS nvarchar(128)), ct.[odd]]name] " +
		"FROM cdc.[dbo_orders_CT] AS ct LEFT JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = ct.__$start_lsn " +
		"WHERE ct.__$start_lsn > @lsn " +
		"AND ct.__$start_lsn <= (SELECT MAX(p.__$start_lsn) FROM (SELECT TOP (@limit) w.__$start_lsn FROM cdc.[dbo_orders_CT] AS w " +
		"WHERE w.__$start_lsn > @lsn AND w.__$start_lsn <= @to ORDER BY w.__$start_lsn) AS p) " +
		"ORDER BY ct.__$start_lsn, ct.__$command_id, ct.__$seqval, ct.__$operation"
	if got := ChangesQuery(ci, true); got != wantEnd {
		t.Errorf("through query:\n got %s\nwant %s", got, wantEnd)
	}
}

func TestSnapshotQueryText(t *testing.T) {
	ci := testCI()
	ci.KeyColumns = []string{"tenant", "id"}
	first := "SELECT TOP (@limit) t.[tenant], t.[id], t.[id], t.[msg], t.[v], CAST(SQL_VARIANT_PROPERTY(t.[v], 'BaseType') AS nvarchar(128)), t.[odd]]name] " +
		"FROM [dbo].[orders] AS t ORDER BY t.[tenant], t.[id]"
	if got := SnapshotQuery(ci, true); got != first {
		t.Errorf("first chunk:\n got %s\nwant %s", got, first)
	}
	next := "SELECT TOP (@limit) t.[tenant], t.[id], t.[id], t.[msg], t.[v], CAST(SQL_VARIANT_PROPERTY(t.[v], 'BaseType') AS nvarchar(128)), t.[odd]]name] " +
		"FROM [dbo].[orders] AS t WHERE (t.[tenant] > @k1) OR (t.[tenant] = @k1 AND t.[id] > @k2) ORDER BY t.[tenant], t.[id]"
	if got := SnapshotQuery(ci, false); got != next {
		t.Errorf("next chunk:\n got %s\nwant %s", got, next)
	}
}

func TestQueryArgs(t *testing.T) {
	l, _ := ParseLSN("0x0000002A000001F00003")
	s, _ := ParseLSN("0x0000002A000001F00004")
	to, _ := ParseLSN("0x0000002B000000000001")
	args := ChangesArgs(Position{LSN: l, CommandID: 3, SeqVal: s, Op: OpUpdateBefore}, to, 500)
	want := []sql.NamedArg{sql.Named("limit", 500), sql.Named("lsn", l), sql.Named("to", to), sql.Named("cmd", int64(3)), sql.Named("seqval", s), sql.Named("op", 3)}
	if len(args) != len(want) {
		t.Fatalf("args %v", args)
	}
	for i := range want {
		if args[i].(sql.NamedArg) != want[i] {
			t.Errorf("arg %d = %#v want %#v", i, args[i], want[i])
		}
	}
	if args := ChangesArgs(Through(l), to, 5); len(args) != 3 {
		t.Errorf("through args %v", args)
	}
	sa := SnapshotArgs([]any{"a", int64(2)}, 10)
	if len(sa) != 3 || sa[1].(sql.NamedArg).Name != "k1" || sa[2].(sql.NamedArg).Value != int64(2) {
		t.Errorf("snapshot args %v", sa)
	}
}

// fakeDriver is a database/sql driver that records each query with its
// named arguments (as the driver receives them), the connection it ran on
// and whether it ran in a transaction, and transaction begins and ends, and
// answers queries from a script.
type fakeDriver struct {
	mu      sync.Mutex
	conns   int
	queries []fakeQuery
	events  []string // "c<conn> begin iso=<n> ro=<bool>", "c<conn> query <text>", "c<conn> exec <text>", "c<conn> rollback", "c<conn> commit"
	answer  func(q string, args []driver.NamedValue) ([]string, [][]driver.Value, error)
}

type fakeQuery struct {
	text string
	args []driver.NamedValue
	conn int
	inTx bool
}

func (d *fakeDriver) Open(string) (driver.Conn, error) { return d.newConn(), nil }

func (d *fakeDriver) newConn() *fakeConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.conns++
	return &fakeConn{d: d, id: d.conns}
}

func (d *fakeDriver) event(c *fakeConn, format string, args ...any) {
	d.events = append(d.events, fmt.Sprintf("c%d ", c.id)+fmt.Sprintf(format, args...))
}

func (d *fakeDriver) Events() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.events...)
}

type fakeConn struct {
	d    *fakeDriver
	id   int
	inTx bool
}

func (c *fakeConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("not supported") }
func (c *fakeConn) Close() error                        { return nil }
func (c *fakeConn) Begin() (driver.Tx, error)           { return nil, errors.New("not supported") }
func (c *fakeConn) BeginTx(_ context.Context, o driver.TxOptions) (driver.Tx, error) {
	if o.ReadOnly {
		return nil, errors.New("read-only transactions are not supported") // as go-mssqldb
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.d.event(c, "begin iso=%s", sql.IsolationLevel(o.Isolation))
	c.inTx = true
	return fakeTx{c}, nil
}
func (c *fakeConn) ExecContext(_ context.Context, q string, _ []driver.NamedValue) (driver.Result, error) {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.d.event(c, "exec %s", q)
	return driver.RowsAffected(0), nil
}
func (c *fakeConn) QueryContext(_ context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.d.mu.Lock()
	c.d.queries = append(c.d.queries, fakeQuery{q, args, c.id, c.inTx})
	c.d.event(c, "query %s", q)
	c.d.mu.Unlock()
	cols, rows, err := c.d.answer(q, args)
	if err != nil {
		return nil, err
	}
	return &fakeRows{cols: cols, rows: rows}, nil
}

type fakeTx struct{ c *fakeConn }

func (t fakeTx) Commit() error   { return t.end("commit") }
func (t fakeTx) Rollback() error { return t.end("rollback") }
func (t fakeTx) end(what string) error {
	t.c.d.mu.Lock()
	defer t.c.d.mu.Unlock()
	t.c.d.event(t.c, "%s", what)
	t.c.inTx = false
	return nil
}

type fakeRows struct {
	cols []string
	rows [][]driver.Value
}

func (r *fakeRows) Columns() []string { return r.cols }
func (r *fakeRows) Close() error      { return nil }
func (r *fakeRows) Next(dest []driver.Value) error {
	if len(r.rows) == 0 {
		return io.EOF
	}
	copy(dest, r.rows[0])
	r.rows = r.rows[1:]
	return nil
}

type fakeConnector struct{ d *fakeDriver }

func (c fakeConnector) Connect(context.Context) (driver.Conn, error) { return c.d.newConn(), nil }
func (c fakeConnector) Driver() driver.Driver                        { return c.d }

func TestDBChangesBindingAndDecoding(t *testing.T) {
	l1, _ := ParseLSN("0x0000002A000001F00003")
	s1, _ := ParseLSN("0x0000002A000001F00004")
	s2, _ := ParseLSN("0x0000002A000001F00005")
	guidWire, _ := GUIDBytes("6F9619FF-8B86-D011-B42D-00C04FC964FF", false)
	commit := time.Date(2026, 11, 29, 10, 0, 0, 3000000, time.UTC) // datetime read as UTC wall clock
	fd := &fakeDriver{answer: func(q string, args []driver.NamedValue) ([]string, [][]driver.Value, error) {
		return []string{"a", "b", "c", "d", "e", "id", "msg", "v", "vt", "g"}, [][]driver.Value{
			{l1[:], int64(1), s1[:], int64(3), commit, int64(7), "old", []byte("1.50"), "decimal", guidWire},
			{l1[:], int64(1), s1[:], int64(4), commit, int64(7), "new", nil, nil, nil},
			{l1[:], int64(2), s2[:], int64(2), nil, int64(8), "ins", int64(5), "int", guidWire},
		}, nil
	}}
	zone, _ := time.LoadLocation("Europe/Berlin")
	db := NewDB(sql.OpenDB(fakeConnector{fd}), Options{ServerTimeZone: zone}, FormatOptions{})
	defer db.Close()
	from := Position{LSN: l1, CommandID: 0, SeqVal: s1, Op: OpDelete}
	to, _ := ParseLSN("0x0000002B000000000001")
	got, err := db.Changes(context.Background(), testCI(), from, to, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(fd.queries) != 1 || fd.queries[0].text != ChangesQuery(testCI(), false) {
		t.Fatalf("queries %v", fd.queries)
	}
	// The driver receives named parameters with LSNs as binary(10) bytes.
	byName := map[string]any{}
	for _, a := range fd.queries[0].args {
		if a.Name == "" {
			t.Errorf("positional arg %v: want named (@name)", a)
		}
		byName[a.Name] = a.Value
	}
	if fmt.Sprint(byName["lsn"]) != fmt.Sprint(l1[:]) || fmt.Sprint(byName["to"]) != fmt.Sprint(to[:]) ||
		byName["limit"] != int64(100) || byName["cmd"] != int64(0) || byName["op"] != int64(1) {
		t.Errorf("args %v", byName)
	}
	if len(got) != 3 {
		t.Fatalf("got %d changes", len(got))
	}
	c0 := got[0]
	if c0.Pos != (Position{LSN: l1, CommandID: 1, SeqVal: s1, Op: OpUpdateBefore}) {
		t.Errorf("pos %v", c0.Pos)
	}
	wantCommit := time.Date(2026, 11, 29, 10, 0, 0, 3000000, zone)
	if !c0.CommitTime.Equal(wantCommit) {
		t.Errorf("commit %v want %v", c0.CommitTime, wantCommit)
	}
	wantVals := [][]Value{
		{{Str: "7"}, {Str: "old"}, {Str: "1.50"}, {Str: "6F9619FF-8B86-D011-B42D-00C04FC964FF"}},
		{{Str: "7"}, {Str: "new"}, {Null: true}, {Null: true}},
		{{Str: "8"}, {Str: "ins"}, {Str: "5"}, {Str: "6F9619FF-8B86-D011-B42D-00C04FC964FF"}},
	}
	for i, c := range got {
		if fmt.Sprint(c.Values) != fmt.Sprint(wantVals[i]) {
			t.Errorf("change %d values %v want %v", i, c.Values, wantVals[i])
		}
	}
	if !got[2].CommitTime.IsZero() || got[2].Pos.Op != OpInsert {
		t.Errorf("change 2: %+v", got[2])
	}
}

func TestDBDecodeErrors(t *testing.T) {
	ci := CaptureInstance{Name: "x", Columns: []Column{{"a", "int"}}}
	l, _ := ParseLSN("0x0000002A000001F00003")
	good := []any{l[:], int64(1), l[:], int64(2), nil, int64(1)}
	if _, err := DecodeChangeRow(ci, good, FormatOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	for i, bad := range [][]any{
		{[]byte{1}, int64(1), l[:], int64(2), nil, int64(1)},
		{l[:], "x", l[:], int64(2), nil, int64(1)},
		{l[:], int64(1), []byte{2}, int64(2), nil, int64(1)},
		{l[:], int64(1), l[:], int64(9), nil, int64(1)},
		{l[:], int64(1), l[:], int64(2), nil},
	} {
		if _, err := DecodeChangeRow(ci, bad, FormatOptions{}, nil); err == nil {
			t.Errorf("bad row %d decoded", i)
		}
	}
}

func TestDBOtherQueries(t *testing.T) {
	l1, _ := ParseLSN("0x0000002A000001F00003")
	l2, _ := ParseLSN("0x0000002A000001F00009")
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fd := &fakeDriver{answer: func(q string, args []driver.NamedValue) ([]string, [][]driver.Value, error) {
		switch q {
		case QueryMaxLSN:
			return []string{"l"}, [][]driver.Value{{l2[:]}}, nil
		case QueryMinLSN:
			if args[0].Value == "missing" {
				return []string{"l", "e"}, [][]driver.Value{{make([]byte, 10), int64(0)}}, nil
			}
			return []string{"l", "e"}, [][]driver.Value{{l1[:], int64(1)}}, nil
		case QueryCommitTime:
			return []string{"t"}, [][]driver.Value{{time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)}}, nil
		case QueryCaptureInstances:
			return []string{"a", "b", "c", "d", "e"}, [][]driver.Value{
				{"dbo_t", "dbo", "t", l1[:], created}, {"dbo_t_v2", "dbo", "t", l2[:], created.Add(time.Hour)}}, nil
		case QueryCapturedColumns:
			return []string{"a", "b", "c"}, [][]driver.Value{
				{"dbo_t", "id", "int"}, {"dbo_t", "msg", "nvarchar"}, {"dbo_t_v2", "id", "int"}, {"gone", "x", "int"}}, nil
		case QueryIndexColumns:
			return []string{"a", "b"}, [][]driver.Value{{"dbo_t", "id"}, {"dbo_t_v2", "id"}}, nil
		}
		if strings.HasPrefix(q, "SELECT TOP (@limit) t.") {
			return []string{"k", "id"}, [][]driver.Value{{int64(1), int64(1)}, {int64(2), int64(2)}}, nil
		}
		return nil, nil, fmt.Errorf("unexpected query %s", q)
	}}
	db := NewDB(sql.OpenDB(fakeConnector{fd}), Options{}, FormatOptions{})
	ctx := context.Background()
	if got, err := db.MaxLSN(ctx); err != nil || got != l2 {
		t.Errorf("MaxLSN %v %v", got, err)
	}
	if got, err := db.MinLSN(ctx, "dbo_t"); err != nil || got != l1 {
		t.Errorf("MinLSN %v %v", got, err)
	}
	if fd.queries[len(fd.queries)-1].args[0].Name != "ci" {
		t.Errorf("MinLSN args %v", fd.queries[len(fd.queries)-1].args)
	}
	if _, err := db.MinLSN(ctx, "missing"); !errors.Is(err, ErrNoCaptureInstance) {
		t.Errorf("MinLSN missing: %v", err)
	}
	if got, err := db.CommitTime(ctx, l1); err != nil || !got.Equal(time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)) {
		t.Errorf("CommitTime %v %v", got, err)
	}
	cis, err := db.CaptureInstances(ctx)
	if err != nil || len(cis) != 2 {
		t.Fatalf("CaptureInstances %v %v", cis, err)
	}
	if cis[0].Name != "dbo_t" || len(cis[0].Columns) != 2 || cis[0].Columns[1] != (Column{"msg", "nvarchar"}) ||
		fmt.Sprint(cis[0].KeyColumns) != "[id]" || cis[1].StartLSN != l2 || !cis[1].SameTable(cis[0]) {
		t.Errorf("CaptureInstances %+v", cis)
	}
	ci := CaptureInstance{Name: "dbo_t", SourceSchema: "dbo", SourceTable: "t", Columns: []Column{{"id", "int"}}, KeyColumns: []string{"id"}}
	// A read-committed snapshot: no transaction, each chunk on the pool.
	sn, err := db.BeginSnapshot(ctx, ci, IsolationReadCommitted)
	if err != nil || sn.LSN() != l2 || !sn.CommitTime().Equal(time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)) {
		t.Fatalf("BeginSnapshot read_committed %v %v", sn, err)
	}
	rows, err := sn.Chunk(ctx, []any{int64(0)}, 2)
	if err != nil || len(rows) != 2 || rows[1].Key[0] != int64(2) || rows[1].Values[0].Str != "2" {
		t.Errorf("Chunk %v %v", rows, err)
	}
	last := fd.queries[len(fd.queries)-1]
	if last.text != SnapshotQuery(ci, false) || last.args[1].Name != "k1" || last.inTx {
		t.Errorf("snapshot query %v", last)
	}
	if err := sn.Close(); err != nil {
		t.Error(err)
	}
	for _, e := range fd.Events() {
		if strings.Contains(e, "begin") || strings.Contains(e, "rollback") {
			t.Errorf("read_committed snapshot used a transaction: %s", e)
		}
	}
	for _, iso := range []SnapshotIsolation{IsolationSnapshot, IsolationReadCommitted} {
		if _, err := db.BeginSnapshot(ctx, CaptureInstance{Name: "nokey"}, iso); !errors.Is(err, ErrNoKey) {
			t.Errorf("no key (%s): %v", iso, err)
		}
	}
	if _, err := db.BeginSnapshot(ctx, ci, "serializable"); err == nil {
		t.Error("unknown isolation accepted")
	}
	// A through position at the bound reads nothing.
	if got, err := db.Changes(ctx, ci, Through(l2), l2, 10); err != nil || got != nil {
		t.Errorf("empty range %v %v", got, err)
	}
}

func TestOpenRejectsBadDSNWithoutEchoingIt(t *testing.T) {
	_, err := Open(context.Background(), "sqlserver://user:s3cret@host:notaport?database=x", Options{})
	if err == nil {
		t.Fatal("bad dsn accepted")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error leaks the dsn: %v", err)
	}
}

func TestDBSnapshotOneTransactionAtSnapshotIsolation(t *testing.T) {
	l, _ := ParseLSN("0x0000002A000001F00009")
	ci := CaptureInstance{Name: "dbo_t", SourceSchema: "dbo", SourceTable: "t", Columns: []Column{{"id", "int"}, {"msg", "nvarchar"}}, KeyColumns: []string{"id"}}
	state := int64(1)
	fd := &fakeDriver{answer: func(q string, args []driver.NamedValue) ([]string, [][]driver.Value, error) {
		switch q {
		case QuerySnapshotIsolationState:
			return []string{"name", "state"}, [][]driver.Value{{"shop", state}}, nil
		case QueryMaxLSN:
			return []string{"l"}, [][]driver.Value{{l[:]}}, nil
		case QueryCommitTime:
			return []string{"t"}, [][]driver.Value{{time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)}}, nil
		case SnapshotQuery(ci, true):
			return []string{"k", "id", "msg"}, [][]driver.Value{{int64(1), int64(1), "a"}, {int64(2), int64(2), "b"}}, nil
		case SnapshotQuery(ci, false):
			return []string{"k", "id", "msg"}, [][]driver.Value{{int64(3), int64(3), "c"}}, nil
		}
		return nil, nil, fmt.Errorf("unexpected query %s", q)
	}}
	zone, _ := time.LoadLocation("Europe/Berlin")
	db := NewDB(sql.OpenDB(fakeConnector{fd}), Options{ServerTimeZone: zone}, FormatOptions{})
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	sn, err := db.BeginSnapshot(ctx, ci, IsolationSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	cancel() // the snapshot outlives the ctx it was begun with
	if sn.LSN() != l || !sn.CommitTime().Equal(time.Date(2026, 1, 1, 1, 0, 0, 0, zone)) {
		t.Errorf("lsn %s commit %v", sn.LSN(), sn.CommitTime())
	}
	// Meanwhile other streams use the pool: not the snapshot's connection.
	if _, err := db.MaxLSN(context.Background()); err != nil {
		t.Fatal(err)
	}
	r1, err := sn.Chunk(context.Background(), nil, 2)
	if err != nil || len(r1) != 2 {
		t.Fatalf("chunk 1 %v %v", r1, err)
	}
	r2, err := sn.Chunk(context.Background(), r1[1].Key, 2)
	if err != nil || len(r2) != 1 || r2[0].Values[1].Str != "c" {
		t.Fatalf("chunk 2 %v %v", r2, err)
	}
	if err := sn.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sn.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := sn.Chunk(context.Background(), nil, 2); err == nil {
		t.Error("chunk after close")
	}
	want := []string{
		"c1 query SELECT name, snapshot_isolation_state FROM sys.databases WHERE database_id = DB_ID()",
		"c1 begin iso=Snapshot",
		"c1 query SELECT sys.fn_cdc_get_max_lsn()",
		"c1 query SELECT TOP (1) tran_end_time FROM cdc.lsn_time_mapping WHERE start_lsn <= @lsn AND tran_end_time IS NOT NULL ORDER BY start_lsn DESC",
		"c2 query SELECT sys.fn_cdc_get_max_lsn()",
		"c1 query SELECT TOP (@limit) t.[id], t.[id], t.[msg] FROM [dbo].[t] AS t ORDER BY t.[id]",
		"c1 query SELECT TOP (@limit) t.[id], t.[id], t.[msg] FROM [dbo].[t] AS t WHERE (t.[id] > @k1) ORDER BY t.[id]",
		"c1 rollback",
		"c1 exec SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
	}
	if got := fd.Events(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, q := range fd.queries {
		if q.conn == 1 && q.text != QuerySnapshotIsolationState && !q.inTx {
			t.Errorf("%s ran outside the transaction", q.text)
		}
	}

	// Snapshot isolation not allowed: a clear error naming the fix, no
	// transaction, the connection back in the pool.
	for _, st := range []int64{0, 2, 3} {
		state = st
		n := len(fd.Events())
		_, err = db.BeginSnapshot(context.Background(), ci, IsolationSnapshot)
		if !errors.Is(err, ErrSnapshotIsolation) || !strings.Contains(err.Error(), "ALTER DATABASE [shop] SET ALLOW_SNAPSHOT_ISOLATION ON") ||
			!strings.Contains(err.Error(), "snapshot_isolation: read_committed") || !strings.Contains(err.Error(), fmt.Sprintf("snapshot_isolation_state %d", st)) {
			t.Fatalf("state %d: %v", st, err)
		}
		if ev := fd.Events()[n:]; len(ev) != 1 || !strings.Contains(ev[0], "snapshot_isolation_state") {
			t.Fatalf("state %d: events %v", st, ev)
		}
	}
	if s := db.db.Stats(); s.InUse != 0 {
		t.Errorf("%d connections still in use", s.InUse)
	}

	// Snapshots hold at most MaxOpenConns-1 connections: with 2, a second
	// snapshot waits for the first to close; the pool keeps serving.
	state = 1
	db2 := NewDB(sql.OpenDB(fakeConnector{fd}), Options{MaxOpenConns: 2}, FormatOptions{})
	defer db2.Close()
	s1, err := db2.BeginSnapshot(context.Background(), ci, IsolationSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer wcancel()
	if _, err := db2.BeginSnapshot(wctx, ci, IsolationSnapshot); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for a connection") {
		t.Fatalf("second snapshot: %v", err)
	}
	if _, err := db2.MaxLSN(context.Background()); err != nil {
		t.Fatal(err)
	}
	s1.Close()
	s2, err := db2.BeginSnapshot(context.Background(), ci, IsolationSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
}
