// Package memsource is an in-memory SQL Server with change data capture, a
// sqlserver.Source for tests of the CDC streams (here and in e2e and lead
// tests). It models what the streams depend on:
//
//   - LSNs: every commit gets the next LSN; every change in it shares that
//     __$start_lsn and gets its own __$seqval and __$command_id, so a
//     transaction of many rows is many changes at one LSN;
//   - cdc.lsn_time_mapping: the commit time of each LSN (from a settable
//     clock), and Tick for the idle entries the capture job writes so that
//     the max LSN advances on a quiet database;
//   - capture instances: at most two per table, each with its own captured
//     columns and a start LSN (its low-water mark), capturing every commit
//     at or after its creation;
//   - the cleanup job: Cleanup purges change rows below a low-water mark
//     and moves each capture instance's minimum LSN forward;
//   - row versions (MVCC): every row keeps its versions with their commit
//     LSN while a snapshot that may need them is open, so a snapshot at
//     SNAPSHOT isolation reads the table as of its LSN whatever commits
//     meanwhile; ALLOW_SNAPSHOT_ISOLATION can be turned off
//     (SetSnapshotIsolation); a read-committed snapshot reads the newest
//     rows at each chunk, like the real one;
//   - injectable errors and hooks per method, and call counts.
//
// Values are stored as the driver values go-mssqldb yields (int64, float64,
// bool, string, []byte, time.Time) and formatted with sqlserver.FormatValue
// using the column's type name, like the real source.
package memsource

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/quarrylake/quarry/producer/sqlserver"
)

// Method names for Inject, Hook and Calls.
const (
	MethodMaxLSN           = "MaxLSN"
	MethodMinLSN           = "MinLSN"
	MethodCaptureInstances = "CaptureInstances"
	MethodChanges          = "Changes"
	MethodCommitTime       = "CommitTime"
	MethodBeginSnapshot    = "BeginSnapshot"
	// MethodSnapshotChunk is Snapshot.Chunk: its hook runs before each
	// chunk, i.e. between the chunks of a snapshot.
	MethodSnapshotChunk = "SnapshotChunk"
)

type table struct {
	schema, name string
	cols         []sqlserver.Column
	key          []string
	// rows holds each key's versions, oldest first; the last one is the
	// current row. A version's row is nil when the commit deleted it.
	rows   map[string][]version
	nextID int // row ids of a table without a key
}

type version struct {
	lsn sqlserver.LSN
	row []any // values in cols order; nil: deleted
}

// current is the row's newest version (nil: none or deleted).
func (t *table) current(k string) []any {
	vs := t.rows[k]
	if len(vs) == 0 {
		return nil
	}
	return vs[len(vs)-1].row
}

// asOf is the row as of lsn (nil: none or deleted).
func asOf(vs []version, lsn sqlserver.LSN) []any {
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i].lsn.Compare(lsn) <= 0 {
			return vs[i].row
		}
	}
	return nil
}

type change struct {
	pos    sqlserver.Position
	values map[string]any
}

type captureInstance struct {
	name    string
	table   *table
	cols    []sqlserver.Column
	start   sqlserver.LSN
	created time.Time
	changes []change
}

type mapping struct {
	lsn sqlserver.LSN
	at  time.Time
}

type fault struct {
	n   int // remaining; <0 forever
	err error
}

// DB is an in-memory database with CDC. It is safe for concurrent use.
type DB struct {
	mu      sync.Mutex
	counter uint64
	now     func() time.Time
	tables  map[string]*table
	cis     map[string]*captureInstance
	order   []string // capture instance names in creation order
	mapping []mapping
	faults  map[string][]*fault
	hooks   map[string]func(ci string)
	calls   map[string]int
	latency time.Duration
	noSnap  bool                        // ALLOW_SNAPSHOT_ISOLATION OFF
	snaps   map[*snapshot]sqlserver.LSN // open snapshots at SNAPSHOT isolation
}

// New returns an empty database whose clock is time.Now.
func New() *DB {
	return &DB{
		now:    time.Now,
		tables: map[string]*table{},
		cis:    map[string]*captureInstance{},
		faults: map[string][]*fault{},
		hooks:  map[string]func(string){},
		calls:  map[string]int{},
		snaps:  map[*snapshot]sqlserver.LSN{},
	}
}

// SetSnapshotIsolation models ALTER DATABASE ... SET
// ALLOW_SNAPSHOT_ISOLATION ON (true, the default) or OFF (false: a
// snapshot at IsolationSnapshot fails with sqlserver.ErrSnapshotIsolation).
func (db *DB) SetSnapshotIsolation(allowed bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.noSnap = !allowed
}

// OpenSnapshots is the number of snapshots at SNAPSHOT isolation not yet
// closed (each would hold a connection and the version store on a real
// server).
func (db *DB) OpenSnapshots() int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return len(db.snaps)
}

// SetClock sets the clock commit times come from.
func (db *DB) SetClock(now func() time.Time) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.now = now
}

// SetLatency makes every Source call sleep d first (honouring ctx), to
// model a remote server.
func (db *DB) SetLatency(d time.Duration) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.latency = d
}

// Inject makes the next n calls of method fail with err (n < 0: every call
// until Inject(method, 0, nil)).
func (db *DB) Inject(method string, n int, err error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if n == 0 {
		delete(db.faults, method)
		return
	}
	db.faults[method] = append(db.faults[method], &fault{n: n, err: err})
}

// Hook runs f at the start of every call of method, outside the lock (f
// may change the database, e.g. run Cleanup during a read), with the
// capture instance the call is about ("" for MaxLSN, CommitTime and
// CaptureInstances). nil removes it.
func (db *DB) Hook(method string, f func(ci string)) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if f == nil {
		delete(db.hooks, method)
		return
	}
	db.hooks[method] = f
}

// Calls is the number of calls of method so far.
func (db *DB) Calls(method string) int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.calls[method]
}

func (db *DB) enter(ctx context.Context, method, ci string) error {
	db.mu.Lock()
	db.calls[method]++
	h := db.hooks[method]
	lat := db.latency
	var err error
	if fs := db.faults[method]; len(fs) > 0 {
		f := fs[0]
		err = f.err
		if f.n > 0 {
			f.n--
			if f.n == 0 {
				db.faults[method] = fs[1:]
			}
		}
	}
	db.mu.Unlock()
	if h != nil {
		h(ci)
	}
	if lat > 0 {
		t := time.NewTimer(lat)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	return ctx.Err()
}

// lsnOf maps a counter to an LSN shaped like SQL Server's (VLF, block,
// slot), ordered like the counter.
func lsnOf(n uint64) sqlserver.LSN {
	var l sqlserver.LSN
	binary.BigEndian.PutUint32(l[0:4], 0x2A+uint32(n>>32))
	binary.BigEndian.PutUint32(l[4:8], uint32(n>>8)&0xFFFFFF)
	binary.BigEndian.PutUint16(l[8:10], uint16(n&0xFF))
	return l
}

func (db *DB) nextLSN() sqlserver.LSN {
	db.counter++
	return lsnOf(db.counter)
}

func tkey(schema, name string) string { return strings.ToLower(schema + "." + name) }

// CreateTable creates schema.name with the columns (name and SQL Server
// type) and the primary key columns (may be empty: then no snapshot).
func (db *DB) CreateTable(schema, name string, cols []sqlserver.Column, key ...string) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.tables[tkey(schema, name)] = &table{schema: schema, name: name, cols: append([]sqlserver.Column(nil), cols...), key: key, rows: map[string][]version{}}
}

// AddColumn adds a column to a table (a schema change): existing capture
// instances keep their columns; a new one captures it.
func (db *DB) AddColumn(schema, name string, col sqlserver.Column) {
	db.mu.Lock()
	defer db.mu.Unlock()
	t := db.mustTable(schema, name)
	t.cols = append(t.cols, col)
	for _, vs := range t.rows {
		for i := range vs {
			if vs[i].row != nil {
				vs[i].row = append(vs[i].row, nil)
			}
		}
	}
}

func (db *DB) mustTable(schema, name string) *table {
	t, ok := db.tables[tkey(schema, name)]
	if !ok {
		panic(fmt.Sprintf("memsource: no table %s.%s", schema, name))
	}
	return t
}

// EnableCDC creates capture instance ci on schema.name capturing the given
// columns (none: all), like sys.sp_cdc_enable_table. Its start LSN is a new
// LSN; every commit after it is captured. It returns the start LSN.
func (db *DB) EnableCDC(schema, name, ci string, cols ...string) sqlserver.LSN {
	db.mu.Lock()
	defer db.mu.Unlock()
	t := db.mustTable(schema, name)
	n := 0
	for _, c := range db.cis {
		if c.table == t {
			n++
		}
	}
	if n >= 2 {
		panic("memsource: a table has at most two capture instances")
	}
	var cc []sqlserver.Column
	if len(cols) == 0 {
		cc = append(cc, t.cols...)
	} else {
		for _, want := range cols {
			for _, c := range t.cols {
				if strings.EqualFold(c.Name, want) {
					cc = append(cc, c)
				}
			}
		}
	}
	l := db.nextLSN()
	now := db.now()
	db.mapping = append(db.mapping, mapping{lsn: l, at: now})
	db.cis[strings.ToLower(ci)] = &captureInstance{name: ci, table: t, cols: cc, start: l, created: now}
	db.order = append(db.order, strings.ToLower(ci))
	return l
}

// DisableCDC drops capture instance ci and its change table.
func (db *DB) DisableCDC(ci string) {
	db.mu.Lock()
	defer db.mu.Unlock()
	delete(db.cis, strings.ToLower(ci))
	for i, n := range db.order {
		if n == strings.ToLower(ci) {
			db.order = append(db.order[:i], db.order[i+1:]...)
			break
		}
	}
}

// Cleanup is the cleanup job: for every capture instance it deletes the
// change rows below low and moves its start LSN to low (if later).
func (db *DB) Cleanup(low sqlserver.LSN) {
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, c := range db.cis {
		db.cleanup(c, low)
	}
}

// CleanupInstance runs the cleanup for one capture instance only.
func (db *DB) CleanupInstance(ci string, low sqlserver.LSN) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if c, ok := db.cis[strings.ToLower(ci)]; ok {
		db.cleanup(c, low)
	}
}

func (db *DB) cleanup(c *captureInstance, low sqlserver.LSN) {
	if low.Compare(c.start) <= 0 {
		return
	}
	c.start = low
	i := sort.Search(len(c.changes), func(i int) bool { return c.changes[i].pos.LSN.Compare(low) >= 0 })
	c.changes = append([]change(nil), c.changes[i:]...)
}

// Tick writes an idle entry to lsn_time_mapping (the capture job does so on
// a quiet database), advancing the max LSN and its time. It returns the LSN.
func (db *DB) Tick() sqlserver.LSN {
	db.mu.Lock()
	defer db.mu.Unlock()
	l := db.nextLSN()
	db.mapping = append(db.mapping, mapping{lsn: l, at: db.now()})
	return l
}

// Rows is the number of rows in schema.name.
func (db *DB) Rows(schema, name string) int {
	db.mu.Lock()
	defer db.mu.Unlock()
	t := db.mustTable(schema, name)
	n := 0
	for k := range t.rows {
		if t.current(k) != nil {
			n++
		}
	}
	return n
}

// Table is the current content of schema.name: each row as column name
// (lower case) → driver value, in key order.
func (db *DB) Table(schema, name string) []map[string]any {
	db.mu.Lock()
	defer db.mu.Unlock()
	t := db.mustTable(schema, name)
	var out []map[string]any
	for _, r := range t.sorted(nil, nil) {
		out = append(out, rowMap(t, r.row))
	}
	return out
}

// ChangeRows is the number of change rows capture instance ci holds.
func (db *DB) ChangeRows(ci string) int {
	db.mu.Lock()
	defer db.mu.Unlock()
	if c, ok := db.cis[strings.ToLower(ci)]; ok {
		return len(c.changes)
	}
	return 0
}

// Tx is a transaction: its statements become changes at one LSN on Commit.
type Tx struct {
	db  *DB
	ops []txOp
}

type txOp struct {
	table  *table
	op     sqlserver.Operation
	key    []any
	values map[string]any
}

// Begin starts a transaction.
func (db *DB) Begin() *Tx { return &Tx{db: db} }

// Insert adds a row (column name → driver value; ints may be int, floats
// float32) to schema.name.
func (tx *Tx) Insert(schema, name string, row map[string]any) *Tx {
	tx.ops = append(tx.ops, txOp{table: tx.table(schema, name), op: sqlserver.OpInsert, values: normalize(row)})
	return tx
}

// Update sets columns of the row with key.
func (tx *Tx) Update(schema, name string, key []any, set map[string]any) *Tx {
	tx.ops = append(tx.ops, txOp{table: tx.table(schema, name), op: sqlserver.OpUpdateAfter, key: normKey(key), values: normalize(set)})
	return tx
}

// Delete deletes the row with key.
func (tx *Tx) Delete(schema, name string, key ...any) *Tx {
	tx.ops = append(tx.ops, txOp{table: tx.table(schema, name), op: sqlserver.OpDelete, key: normKey(key)})
	return tx
}

func (tx *Tx) table(schema, name string) *table {
	tx.db.mu.Lock()
	defer tx.db.mu.Unlock()
	return tx.db.mustTable(schema, name)
}

func normKey(k []any) []any {
	out := make([]any, len(k))
	for i, v := range k {
		out[i] = norm(v)
	}
	return out
}

func normalize(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = norm(v)
	}
	return out
}

func norm(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case int16:
		return int64(x)
	case int8:
		return int64(x)
	case uint8:
		return int64(x)
	case float32:
		return float64(x)
	}
	return v
}

// Commit applies the transaction at one new LSN and captures its changes
// in every capture instance of each table (one command id per statement,
// one seqval per row change; an update yields update-before and
// update-after with the same seqval). It returns the LSN. A statement on a
// missing row (or an insert of an existing key) panics: tests build valid
// transactions.
func (tx *Tx) Commit() sqlserver.LSN {
	db := tx.db
	db.mu.Lock()
	defer db.mu.Unlock()
	lsn := db.nextLSN()
	now := db.now()
	db.mapping = append(db.mapping, mapping{lsn: lsn, at: now})
	for i, op := range tx.ops {
		t := op.table
		var before, after map[string]any
		switch op.op {
		case sqlserver.OpInsert:
			after = op.values
			row := make([]any, len(t.cols))
			for j, c := range t.cols {
				row[j] = lookup(after, c.Name)
			}
			k := keyString(t, keyOf(t, row))
			if t.current(k) != nil {
				panic("memsource: duplicate key " + k)
			}
			db.put(t, k, lsn, row)
			after = rowMap(t, row)
		case sqlserver.OpUpdateAfter:
			k := keyString(t, op.key)
			row := t.current(k)
			if row == nil {
				panic("memsource: update of missing key " + k)
			}
			before = rowMap(t, row)
			nr := append([]any(nil), row...)
			for j, c := range t.cols {
				if v, ok := lookupOK(op.values, c.Name); ok {
					nr[j] = v
				}
			}
			db.put(t, k, lsn, nr)
			after = rowMap(t, nr)
		case sqlserver.OpDelete:
			k := keyString(t, op.key)
			row := t.current(k)
			if row == nil {
				panic("memsource: delete of missing key " + k)
			}
			before = rowMap(t, row)
			db.put(t, k, lsn, nil)
		}
		db.counter++
		seq := lsnOf(db.counter)
		for _, name := range db.order {
			c := db.cis[name]
			if c.table != t {
				continue
			}
			pos := sqlserver.Position{LSN: lsn, CommandID: int64(i + 1), SeqVal: seq}
			switch op.op {
			case sqlserver.OpInsert:
				pos.Op = sqlserver.OpInsert
				c.changes = append(c.changes, change{pos: pos, values: after})
			case sqlserver.OpDelete:
				pos.Op = sqlserver.OpDelete
				c.changes = append(c.changes, change{pos: pos, values: before})
			case sqlserver.OpUpdateAfter:
				pos.Op = sqlserver.OpUpdateBefore
				c.changes = append(c.changes, change{pos: pos, values: before})
				pos.Op = sqlserver.OpUpdateAfter
				c.changes = append(c.changes, change{pos: pos, values: after})
			}
		}
	}
	return lsn
}

// put adds a version of row k committed at lsn (row nil: deleted) and
// drops the versions no open snapshot can read.
func (db *DB) put(t *table, k string, lsn sqlserver.LSN, row []any) {
	t.rows[k] = db.prune(append(t.rows[k], version{lsn: lsn, row: row}))
	if len(t.rows[k]) == 0 {
		delete(t.rows, k)
	}
}

// prune keeps the newest version and every version an open snapshot may
// read: for the oldest open snapshot, its visible version and later ones.
func (db *DB) prune(vs []version) []version {
	if len(db.snaps) == 0 {
		last := vs[len(vs)-1]
		if last.row == nil {
			return nil
		}
		return []version{last}
	}
	var oldest sqlserver.LSN
	first := true
	for _, l := range db.snaps {
		if first || l.Compare(oldest) < 0 {
			oldest, first = l, false
		}
	}
	i := len(vs) - 1
	for i > 0 && vs[i].lsn.Compare(oldest) > 0 {
		i--
	}
	return append([]version(nil), vs[i:]...)
}

func lookupOK(m map[string]any, name string) (any, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	for k, v := range m {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return nil, false
}

func lookup(m map[string]any, name string) any { v, _ := lookupOK(m, name); return v }

func rowMap(t *table, row []any) map[string]any {
	m := make(map[string]any, len(row))
	for j, c := range t.cols {
		m[strings.ToLower(c.Name)] = row[j]
	}
	return m
}

func keyOf(t *table, row []any) []any {
	k := make([]any, len(t.key))
	for i, name := range t.key {
		for j, c := range t.cols {
			if strings.EqualFold(c.Name, name) {
				k[i] = row[j]
			}
		}
	}
	return k
}

func keyString(t *table, key []any) string {
	if len(t.key) == 0 {
		t.nextID++
		return fmt.Sprintf("rowid-%d", t.nextID)
	}
	return fmt.Sprintf("%#v", key)
}

// compareKeys orders key tuples (int64, float64, string, []byte,
// time.Time, bool; nil first).
func compareKeys(a, b []any) int {
	for i := range a {
		if c := compareAny(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

func compareAny(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	switch x := a.(type) {
	case int64:
		y := b.(int64)
		return cmp3(x < y, x > y)
	case float64:
		y := b.(float64)
		return cmp3(x < y, x > y)
	case string:
		return strings.Compare(x, b.(string))
	case []byte:
		return bytes.Compare(x, b.([]byte))
	case time.Time:
		return x.Compare(b.(time.Time))
	case bool:
		y := b.(bool)
		return cmp3(!x && y, x && !y)
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

func cmp3(less, more bool) int {
	switch {
	case less:
		return -1
	case more:
		return 1
	}
	return 0
}

// MaxLSN implements sqlserver.Source.
func (db *DB) MaxLSN(ctx context.Context) (sqlserver.LSN, error) {
	if err := db.enter(ctx, MethodMaxLSN, ""); err != nil {
		return sqlserver.LSN{}, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if len(db.mapping) == 0 {
		return sqlserver.LSN{}, nil
	}
	return db.mapping[len(db.mapping)-1].lsn, nil
}

// MinLSN implements sqlserver.Source.
func (db *DB) MinLSN(ctx context.Context, ci string) (sqlserver.LSN, error) {
	if err := db.enter(ctx, MethodMinLSN, ci); err != nil {
		return sqlserver.LSN{}, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	c, ok := db.cis[strings.ToLower(ci)]
	if !ok {
		return sqlserver.LSN{}, fmt.Errorf("%w: %s", sqlserver.ErrNoCaptureInstance, ci)
	}
	return c.start, nil
}

// CaptureInstances implements sqlserver.Source.
func (db *DB) CaptureInstances(ctx context.Context) ([]sqlserver.CaptureInstance, error) {
	if err := db.enter(ctx, MethodCaptureInstances, ""); err != nil {
		return nil, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	var out []sqlserver.CaptureInstance
	for _, n := range db.order {
		c := db.cis[n]
		out = append(out, sqlserver.CaptureInstance{
			Name: c.name, SourceSchema: c.table.schema, SourceTable: c.table.name,
			StartLSN: c.start, CreateDate: c.created,
			Columns: append([]sqlserver.Column(nil), c.cols...), KeyColumns: append([]string(nil), c.table.key...),
		})
	}
	return out, nil
}

// Changes implements sqlserver.Source.
func (db *DB) Changes(ctx context.Context, ci sqlserver.CaptureInstance, from sqlserver.Position, to sqlserver.LSN, limit int) ([]sqlserver.Change, error) {
	if err := db.enter(ctx, MethodChanges, ci.Name); err != nil {
		return nil, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	c, ok := db.cis[strings.ToLower(ci.Name)]
	if !ok {
		return nil, fmt.Errorf("changes of %s: %w", ci.Name, sqlserver.ErrNoCaptureInstance)
	}
	i := sort.Search(len(c.changes), func(i int) bool { return c.changes[i].pos.Compare(from) > 0 })
	var out []sqlserver.Change
	for ; i < len(c.changes) && len(out) < limit; i++ {
		ch := c.changes[i]
		if ch.pos.LSN.Compare(to) > 0 {
			break
		}
		vals := make([]sqlserver.Value, len(ci.Columns))
		for j, col := range ci.Columns {
			vals[j] = sqlserver.FormatValue(col.Type, ch.values[strings.ToLower(col.Name)], sqlserver.FormatOptions{})
		}
		out = append(out, sqlserver.Change{Pos: ch.pos, CommitTime: db.timeOf(ch.pos.LSN), Values: vals})
	}
	return out, nil
}

func (db *DB) timeOf(lsn sqlserver.LSN) time.Time {
	i := sort.Search(len(db.mapping), func(i int) bool { return db.mapping[i].lsn.Compare(lsn) > 0 })
	if i == 0 {
		return time.Time{}
	}
	return db.mapping[i-1].at
}

// CommitTime implements sqlserver.Source.
func (db *DB) CommitTime(ctx context.Context, lsn sqlserver.LSN) (time.Time, error) {
	if err := db.enter(ctx, MethodCommitTime, ""); err != nil {
		return time.Time{}, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.timeOf(lsn), nil
}

type keyedRow struct {
	key []any
	row []any
}

// sorted is the rows after the key after (nil: all) in key order, as of
// lsn (nil: the current rows).
func (t *table) sorted(after []any, lsn *sqlserver.LSN) []keyedRow {
	var all []keyedRow
	for k, vs := range t.rows {
		r := t.current(k)
		if lsn != nil {
			r = asOf(vs, *lsn)
		}
		if r == nil {
			continue
		}
		key := keyOf(t, r)
		if after == nil || compareKeys(key, after) > 0 {
			all = append(all, keyedRow{key, r})
		}
	}
	sort.Slice(all, func(i, j int) bool { return compareKeys(all[i].key, all[j].key) < 0 })
	return all
}

// BeginSnapshot implements sqlserver.Source: the snapshot's LSN is the max
// LSN when it begins; at IsolationSnapshot its chunks read the row
// versions committed at or before it.
func (db *DB) BeginSnapshot(ctx context.Context, ci sqlserver.CaptureInstance, iso sqlserver.SnapshotIsolation) (sqlserver.Snapshot, error) {
	if err := db.enter(ctx, MethodBeginSnapshot, ci.Name); err != nil {
		return nil, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	t, ok := db.tables[tkey(ci.SourceSchema, ci.SourceTable)]
	if !ok {
		return nil, fmt.Errorf("snapshot %s: no such table", ci.Table())
	}
	if len(t.key) == 0 {
		return nil, fmt.Errorf("snapshot %s: %w", ci.Table(), sqlserver.ErrNoKey)
	}
	switch iso {
	case sqlserver.IsolationSnapshot:
		if db.noSnap {
			return nil, fmt.Errorf("snapshot %s: %w: database memsource has snapshot_isolation_state 0 (1 is ON); "+
				"run ALTER DATABASE [memsource] SET ALLOW_SNAPSHOT_ISOLATION ON, or set snapshot_isolation: read_committed "+
				"to accept rows changed during the snapshot twice", ci.Table(), sqlserver.ErrSnapshotIsolation)
		}
	case sqlserver.IsolationReadCommitted:
	default:
		return nil, fmt.Errorf("snapshot %s: unknown isolation %q", ci.Table(), iso)
	}
	s := &snapshot{db: db, t: t, ci: ci, iso: iso}
	if len(db.mapping) > 0 {
		s.lsn = db.mapping[len(db.mapping)-1].lsn
	}
	s.at = db.timeOf(s.lsn)
	if iso == sqlserver.IsolationSnapshot {
		db.snaps[s] = s.lsn
	}
	return s, nil
}

type snapshot struct {
	db     *DB
	t      *table
	ci     sqlserver.CaptureInstance
	iso    sqlserver.SnapshotIsolation
	lsn    sqlserver.LSN
	at     time.Time
	closed bool
}

func (s *snapshot) LSN() sqlserver.LSN    { return s.lsn }
func (s *snapshot) CommitTime() time.Time { return s.at }

func (s *snapshot) Close() error {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	s.closed = true
	delete(s.db.snaps, s)
	return nil
}

// Chunk implements sqlserver.Snapshot.
func (s *snapshot) Chunk(ctx context.Context, after []any, limit int) ([]sqlserver.Row, error) {
	db := s.db
	if err := db.enter(ctx, MethodSnapshotChunk, s.ci.Name); err != nil {
		return nil, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("snapshot %s: closed", s.ci.Table())
	}
	var at *sqlserver.LSN
	if s.iso == sqlserver.IsolationSnapshot {
		at = &s.lsn
	}
	all := s.t.sorted(after, at)
	if len(all) > limit {
		all = all[:limit]
	}
	out := make([]sqlserver.Row, len(all))
	for i, r := range all {
		m := rowMap(s.t, r.row)
		vals := make([]sqlserver.Value, len(s.ci.Columns))
		for j, col := range s.ci.Columns {
			vals[j] = sqlserver.FormatValue(col.Type, m[strings.ToLower(col.Name)], sqlserver.FormatOptions{})
		}
		out[i] = sqlserver.Row{Key: r.key, Values: vals}
	}
	return out, nil
}

var _ sqlserver.Source = (*DB)(nil)
