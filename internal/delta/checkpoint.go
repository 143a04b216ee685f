package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/crashpoint"
	"github.com/quarrylake/quarry/internal/pqfile"
)

// Checkpoints are classic single-file V1 checkpoints
// (_delta_log/<version:020d>.checkpoint.parquet), as PROTOCOL.md's
// "Checkpoint Schema" lays them out: one row per action with the struct
// columns txn, add, remove, metaData and protocol, exactly one of them set
// per row. Every field is nullable, maps are map<string,string> with
// nullable values and lists have nullable elements, as the reference
// implementation writes them; add.stats is the JSON string
// (delta.checkpoint.writeStatsAsJson). protocol.readerFeatures and
// writerFeatures are written null (the table uses neither, reader 1 / writer
// 2). _last_checkpoint ({"version","size","sizeInBytes","numOfAddFiles"})
// points at the newest; readers start from it and fall back to listing.

type cpRow struct {
	Txn      *cpTxn      `parquet:"txn,optional"`
	Add      *cpAdd      `parquet:"add,optional"`
	Remove   *cpRemove   `parquet:"remove,optional"`
	MetaData *cpMetaData `parquet:"metaData,optional"`
	Protocol *cpProtocol `parquet:"protocol,optional"`
}

// strMap is a map<string,string> with nullable values.
type strMap = map[string]*string

type cpTxn struct {
	AppID       *string `parquet:"appId,optional"`
	Version     *int64  `parquet:"version,optional"`
	LastUpdated *int64  `parquet:"lastUpdated,optional"`
}

type cpAdd struct {
	Path             *string `parquet:"path,optional"`
	PartitionValues  strMap  `parquet:"partitionValues,optional"`
	Size             *int64  `parquet:"size,optional"`
	ModificationTime *int64  `parquet:"modificationTime,optional"`
	DataChange       *bool   `parquet:"dataChange,optional"`
	Stats            *string `parquet:"stats,optional"`
	Tags             strMap  `parquet:"tags,optional"`
}

type cpRemove struct {
	Path                 *string `parquet:"path,optional"`
	DeletionTimestamp    *int64  `parquet:"deletionTimestamp,optional"`
	DataChange           *bool   `parquet:"dataChange,optional"`
	ExtendedFileMetadata *bool   `parquet:"extendedFileMetadata,optional"`
	PartitionValues      strMap  `parquet:"partitionValues,optional"`
	Size                 *int64  `parquet:"size,optional"`
	Tags                 strMap  `parquet:"tags,optional"`
}

type cpFormat struct {
	Provider *string `parquet:"provider,optional"`
	Options  strMap  `parquet:"options,optional"`
}

type cpMetaData struct {
	ID               *string   `parquet:"id,optional"`
	Name             *string   `parquet:"name,optional"`
	Description      *string   `parquet:"description,optional"`
	Format           *cpFormat `parquet:"format,optional"`
	SchemaString     *string   `parquet:"schemaString,optional"`
	PartitionColumns []*string `parquet:"partitionColumns,optional,list"`
	Configuration    strMap    `parquet:"configuration,optional"`
	CreatedTime      *int64    `parquet:"createdTime,optional"`
}

type cpProtocol struct {
	MinReaderVersion *int32   `parquet:"minReaderVersion,optional"`
	MinWriterVersion *int32   `parquet:"minWriterVersion,optional"`
	ReaderFeatures   []string `parquet:"readerFeatures,optional,list"`
	WriterFeatures   []string `parquet:"writerFeatures,optional,list"`
}

// toStrMap converts m for a checkpoint; nil stays nil (a null map).
func toStrMap(m map[string]string) strMap {
	if m == nil {
		return nil
	}
	out := make(strMap, len(m))
	for k, v := range m {
		out[k] = ptr(v)
	}
	return out
}

// fromStrMap is the inverse of toStrMap; a null value reads as "" (the
// protocol's null partition value).
func fromStrMap(m strMap) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = deref(v)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// parseCheckpointName returns the version of a classic single-file
// checkpoint name "<020d>.checkpoint.parquet".
func parseCheckpointName(name string) (int64, bool) {
	const suffix = ".checkpoint.parquet"
	if len(name) != 20+len(suffix) || !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	v, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// CheckpointKey is the key of version's classic checkpoint.
func (t *Table) CheckpointKey(version int64) string {
	return t.key(fmt.Sprintf("_delta_log/%020d.checkpoint.parquet", version))
}

// LastCheckpointKey is the key of _last_checkpoint.
func (t *Table) LastCheckpointKey() string { return t.key("_delta_log/_last_checkpoint") }

// LastCheckpoint is the content of _delta_log/_last_checkpoint.
type LastCheckpoint struct {
	Version       int64 `json:"version"`
	Size          int64 `json:"size"` // actions in the checkpoint
	SizeInBytes   int64 `json:"sizeInBytes,omitempty"`
	NumOfAddFiles int64 `json:"numOfAddFiles,omitempty"`
}

// Crash points of Checkpoint (internal/crashpoint).
const (
	// CrashBeforeLastCheckpoint: the checkpoint Parquet is written,
	// _last_checkpoint still names the previous one.
	CrashBeforeLastCheckpoint = "delta.checkpoint.before-last-checkpoint"
)

// Checkpoint writes a classic checkpoint of the table's newest version (the
// protocol, metadata, txns, active files and tombstones) and then points
// _last_checkpoint at it. Checkpoints only speed up replay; a reader that
// ignores them sees the same table, and a crash between the two writes
// leaves _last_checkpoint at the previous checkpoint, which readers still
// start from. It returns the checkpointed version (-1 for a table without a
// log, where it writes nothing). It holds the table's lock only to replay
// the log, so commits and snapshots proceed while it writes.
//
// It keeps every tombstone; CheckpointExpiring drops the expired ones.
func (t *Table) Checkpoint(ctx context.Context) (int64, error) {
	return t.CheckpointExpiring(ctx, Expiry{})
}

// Expiry says which tombstones a checkpoint leaves out. PROTOCOL.md: a
// checkpoint holds the remove tombstones "until they are expired", that is
// older than the table's tombstone retention (Delta's
// delta.deletedFileRetentionDuration, a week by default). Without expiry
// a checkpoint grows with every remove ever committed.
type Expiry struct {
	// Before drops tombstones whose deletionTimestamp is before it; zero
	// keeps them all. A tombstone without a deletionTimestamp is kept.
	Before time.Time
	// Keep, when set, keeps an expired tombstone it returns true for.
	Keep func(Remove) bool
}

// expired reports whether e drops r.
func (e Expiry) expired(r Remove) bool {
	if e.Before.IsZero() || r.DeletionTimestamp <= 0 || r.DeletionTimestamp >= e.Before.UnixMilli() {
		return false
	}
	return e.Keep == nil || !e.Keep(r)
}

// CheckpointExpiring is Checkpoint leaving out the tombstones e expires.
// The table reads the same either way: a tombstone names a file no version
// from the checkpoint on references; it only tells cleaners (vacuum) how
// long ago the file was removed.
func (t *Table) CheckpointExpiring(ctx context.Context, e Expiry) (int64, error) {
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return -1, err
	}
	return t.checkpoint(ctx, snap, e)
}

func (t *Table) checkpoint(ctx context.Context, snap *Snapshot, e Expiry) (int64, error) {
	if snap.Version < 0 {
		return -1, nil
	}
	rows := make([]cpRow, 0, 2+len(snap.Txns)+len(snap.Files)+len(snap.Tombstones))
	rows = append(rows, cpRow{Protocol: &cpProtocol{
		MinReaderVersion: ptr(int32(snap.Protocol.MinReaderVersion)), MinWriterVersion: ptr(int32(snap.Protocol.MinWriterVersion))}})
	md := snap.Metadata
	cols := make([]*string, len(md.PartitionColumns))
	for i, c := range md.PartitionColumns {
		cols[i] = ptr(c)
	}
	rows = append(rows, cpRow{MetaData: &cpMetaData{
		ID: ptr(md.ID), Name: optStr(md.Name), Description: optStr(md.Description),
		Format:       &cpFormat{Provider: ptr(md.Format.Provider), Options: toStrMap(nonNil(md.Format.Options))},
		SchemaString: ptr(md.SchemaString), PartitionColumns: cols,
		Configuration: toStrMap(nonNil(md.Configuration)), CreatedTime: optInt(md.CreatedTime)}})
	apps := make([]string, 0, len(snap.Txns))
	for app := range snap.Txns {
		apps = append(apps, app)
	}
	sort.Strings(apps)
	for _, app := range apps {
		rows = append(rows, cpRow{Txn: &cpTxn{AppID: ptr(app), Version: ptr(snap.Txns[app])}})
	}
	for _, a := range snap.Files {
		rows = append(rows, cpRow{Add: &cpAdd{
			Path: ptr(EncodePath(a.Path)), PartitionValues: toStrMap(nonNil(a.PartitionValues)), Size: ptr(a.Size),
			ModificationTime: ptr(a.ModificationTime), DataChange: ptr(false), Stats: optStr(a.Stats), Tags: toStrMap(a.Tags)}})
	}
	for _, r := range snap.Tombstones {
		if e.expired(r) {
			continue
		}
		rm := &cpRemove{Path: ptr(EncodePath(r.Path)), DeletionTimestamp: optInt(r.DeletionTimestamp), DataChange: ptr(false)}
		if r.ExtendedFileMetadata {
			rm.ExtendedFileMetadata, rm.PartitionValues, rm.Size = ptr(true), toStrMap(nonNil(r.PartitionValues)), ptr(r.Size)
			rm.Tags = toStrMap(r.Tags)
		}
		rows = append(rows, cpRow{Remove: rm})
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[cpRow](&buf, parquet.Compression(&parquet.Zstd),
		// No min/max of the long strings (the schema, the stats JSON, the
		// paths): no reader prunes a checkpoint by them, and the schema's
		// bounds alone tripled its size and its read time.
		parquet.SkipPageBounds("metaData", "schemaString"), parquet.SkipPageBounds("add", "stats"),
		parquet.SkipPageBounds("add", "path"), parquet.SkipPageBounds("remove", "path"))
	if _, err := w.Write(rows); err != nil {
		return -1, fmt.Errorf("checkpoint %s version %d: %w", t.root, snap.Version, err)
	}
	if err := w.Close(); err != nil {
		return -1, fmt.Errorf("checkpoint %s version %d: %w", t.root, snap.Version, err)
	}
	if err := t.store.Put(ctx, t.CheckpointKey(snap.Version), buf.Bytes()); err != nil {
		return -1, fmt.Errorf("checkpoint %s version %d: %w", t.root, snap.Version, err)
	}
	crashpoint.Hit(CrashBeforeLastCheckpoint)
	last, err := json.Marshal(LastCheckpoint{Version: snap.Version, Size: int64(len(rows)),
		SizeInBytes: int64(buf.Len()), NumOfAddFiles: int64(len(snap.Files))})
	if err != nil {
		return -1, err
	}
	if err := t.store.Put(ctx, t.LastCheckpointKey(), last); err != nil {
		return -1, fmt.Errorf("checkpoint %s: _last_checkpoint: %w", t.root, err)
	}
	return snap.Version, nil
}

// readLastCheckpoint reads _last_checkpoint. A missing file is
// objstore.ErrNotFound; an unreadable one wraps ErrCorrupt.
func (t *Table) readLastCheckpoint(ctx context.Context) (LastCheckpoint, error) {
	data, err := t.store.Get(ctx, t.LastCheckpointKey())
	if err != nil {
		return LastCheckpoint{}, err
	}
	var lc LastCheckpoint
	if err := json.Unmarshal(data, &lc); err != nil {
		return LastCheckpoint{}, fmt.Errorf("%s: %v: %w", t.LastCheckpointKey(), err, ErrCorrupt)
	}
	if lc.Version < 0 {
		return LastCheckpoint{}, fmt.Errorf("%s: version %d: %w", t.LastCheckpointKey(), lc.Version, ErrCorrupt)
	}
	return lc, nil
}

func optStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optInt(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// checkpointCodecs are the codecs a checkpoint's column chunks may use:
// quarry writes zstd, Spark and delta-rs snappy by default. Others are
// refused as corrupt rather than decoded by a codec that allocates what a
// damaged page header states.
var checkpointCodecs = []format.CompressionCodec{format.Uncompressed, format.Snappy, format.Zstd}

// readCheckpoint replays a classic checkpoint into a state at version.
// It returns the number of actions read.
func (t *Table) readCheckpoint(ctx context.Context, version int64) (st *state, actions int64, err error) {
	key := t.CheckpointKey(version)
	// One read of the whole object: a Parquet reader over a ranged reader
	// makes a read per page of each of the checkpoint's ~50 columns (a
	// request each on S3), and a checkpoint is one Parquet file of
	// metadata, far smaller than the table. Page indexes and bloom filters
	// are not used.
	data, err := t.store.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("read checkpoint %s: %w", key, err)
	}
	f, err := pqfile.Open(bytes.NewReader(data), int64(len(data)), checkpointCodecs, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err == nil {
		err = pqfile.CheckPages(data, f, pqfile.MaxPageSize)
	}
	if err == nil {
		err = pqfile.CheckBodies(data, f)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("checkpoint %s: %v: %w", key, err, ErrCorrupt)
	}
	defer func() {
		if p := recover(); p != nil { // parquet-go panics on unconvertible schemas
			st, actions, err = nil, 0, fmt.Errorf("checkpoint %s: %v: %w", key, p, ErrCorrupt)
		}
	}()
	st = newState()
	apply := func(row *cpRow) error {
		actions++
		if err := st.applyCheckpointRow(*row); err != nil {
			return fmt.Errorf("checkpoint %s: %v: %w", key, err, ErrCorrupt)
		}
		return nil
	}
	if parquet.EqualNodes(f.Schema(), cpSchema()) {
		err = readCheckpointRows(ctx, f, apply)
	} else {
		err = readCheckpointConverted(ctx, f, apply)
	}
	if err != nil {
		if errors.Is(err, ErrCorrupt) || ctx.Err() != nil {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("checkpoint %s: %v: %w", key, err, ErrCorrupt)
	}
	if st.protocol == nil || st.metadata == nil {
		return nil, 0, fmt.Errorf("checkpoint %s: no protocol or metaData: %w", key, ErrCorrupt)
	}
	if st.protocol.MinReaderVersion > ReaderVersion || len(st.protocol.ReaderFeatures) > 0 {
		return nil, 0, fmt.Errorf("checkpoint %s: table needs reader version %d (features %v): %w",
			key, st.protocol.MinReaderVersion, st.protocol.ReaderFeatures, ErrUnsupported)
	}
	st.version = version
	return st, actions, nil
}

func (s *state) applyCheckpointRow(row cpRow) error {
	switch {
	case row.Protocol != nil:
		s.protocol = &Protocol{MinReaderVersion: int(deref(row.Protocol.MinReaderVersion)), MinWriterVersion: int(deref(row.Protocol.MinWriterVersion)),
			ReaderFeatures: row.Protocol.ReaderFeatures, WriterFeatures: row.Protocol.WriterFeatures}
	case row.MetaData != nil:
		m := row.MetaData
		md := &Metadata{ID: deref(m.ID), Name: deref(m.Name), Description: deref(m.Description),
			SchemaString: deref(m.SchemaString), PartitionColumns: make([]string, 0, len(m.PartitionColumns)),
			Configuration: fromStrMap(m.Configuration), CreatedTime: deref(m.CreatedTime)}
		for _, c := range m.PartitionColumns {
			md.PartitionColumns = append(md.PartitionColumns, deref(c))
		}
		if m.Format != nil {
			md.Format = Format{Provider: deref(m.Format.Provider), Options: fromStrMap(m.Format.Options)}
		}
		s.metadata = md
	case row.Txn != nil:
		s.txns[deref(row.Txn.AppID)] = deref(row.Txn.Version)
	case row.Add != nil:
		p, err := DecodePath(deref(row.Add.Path))
		if err != nil {
			return err
		}
		s.files[p] = Add{Path: p, PartitionValues: fromStrMap(row.Add.PartitionValues), Size: deref(row.Add.Size),
			ModificationTime: deref(row.Add.ModificationTime), DataChange: deref(row.Add.DataChange),
			Stats: deref(row.Add.Stats), Tags: fromStrMap(row.Add.Tags)}
	case row.Remove != nil:
		p, err := DecodePath(deref(row.Remove.Path))
		if err != nil {
			return err
		}
		s.tombstones[p] = Remove{Path: p, DeletionTimestamp: deref(row.Remove.DeletionTimestamp),
			DataChange: deref(row.Remove.DataChange), ExtendedFileMetadata: deref(row.Remove.ExtendedFileMetadata),
			PartitionValues: fromStrMap(row.Remove.PartitionValues), Size: deref(row.Remove.Size), Tags: fromStrMap(row.Remove.Tags)}
	}
	return nil
}

// cpSchema is the Parquet schema this package writes checkpoints in, built
// on first use: a process that reads no checkpoint (quarry query of a young
// lake, quarry help) does not pay for it at start.
var cpSchema = sync.OnceValue(func() *parquet.Schema { return parquet.SchemaOf(cpRow{}) })

// readCheckpointRows reads a checkpoint written in cpSchema (by this
// package) as rows, reconstructed one by one. It is what parquet-go's
// generic reader does, without its conversion step; the small buffer
// matters most: parquet-go's cost per ReadRows call grows with the buffer's
// length, so 16 rows a call read a 13-action checkpoint in 1.3 ms CPU where
// the generic reader with 256 took 7 ms, and a 4,000-file one in 124 ms
// where 128 rows a call took 163 ms.
func readCheckpointRows(ctx context.Context, f *parquet.File, fn func(*cpRow) error) error {
	buf := make([]parquet.Row, 16)
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, rerr := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				var row cpRow
				if err := cpSchema().Reconstruct(&row, r); err != nil {
					rows.Close()
					return err
				}
				if err := fn(&row); err != nil {
					rows.Close()
					return err
				}
			}
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				rows.Close()
				return rerr
			}
			if err := ctx.Err(); err != nil {
				rows.Close()
				return err
			}
		}
		if err := rows.Close(); err != nil {
			return err
		}
	}
	return nil
}

// readCheckpointConverted reads a checkpoint another writer laid out
// differently (other column order, extra columns) through parquet-go's
// conversion to cpRow.
func readCheckpointConverted(ctx context.Context, f *parquet.File, fn func(*cpRow) error) error {
	r := parquet.NewGenericReader[cpRow](f)
	defer r.Close()
	buf := make([]cpRow, 256)
	for {
		n, rerr := r.Read(buf)
		for i := range buf[:n] {
			if err := fn(&buf[i]); err != nil {
				return err
			}
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			return rerr
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}
