package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// Checkpoints are classic single-file V1 checkpoints
// (_delta_log/<version:020d>.checkpoint.parquet): one row per action with
// the columns txn, add, remove, metaData and protocol, every field nullable
// as the reference implementation writes them. _last_checkpoint points at the
// newest; readers here find checkpoints by listing and use the newest one.

type cpRow struct {
	Txn      *cpTxn      `parquet:"txn,optional"`
	Add      *cpAdd      `parquet:"add,optional"`
	Remove   *cpRemove   `parquet:"remove,optional"`
	MetaData *cpMetaData `parquet:"metaData,optional"`
	Protocol *cpProtocol `parquet:"protocol,optional"`
}

type cpTxn struct {
	AppID       *string `parquet:"appId,optional"`
	Version     *int64  `parquet:"version,optional"`
	LastUpdated *int64  `parquet:"lastUpdated,optional"`
}

type cpAdd struct {
	Path             *string           `parquet:"path,optional"`
	PartitionValues  map[string]string `parquet:"partitionValues,optional"`
	Size             *int64            `parquet:"size,optional"`
	ModificationTime *int64            `parquet:"modificationTime,optional"`
	DataChange       *bool             `parquet:"dataChange,optional"`
	Stats            *string           `parquet:"stats,optional"`
	Tags             map[string]string `parquet:"tags,optional"`
}

type cpRemove struct {
	Path                 *string           `parquet:"path,optional"`
	DeletionTimestamp    *int64            `parquet:"deletionTimestamp,optional"`
	DataChange           *bool             `parquet:"dataChange,optional"`
	ExtendedFileMetadata *bool             `parquet:"extendedFileMetadata,optional"`
	PartitionValues      map[string]string `parquet:"partitionValues,optional"`
	Size                 *int64            `parquet:"size,optional"`
}

type cpFormat struct {
	Provider *string           `parquet:"provider,optional"`
	Options  map[string]string `parquet:"options,optional"`
}

type cpMetaData struct {
	ID               *string           `parquet:"id,optional"`
	Name             *string           `parquet:"name,optional"`
	Description      *string           `parquet:"description,optional"`
	Format           *cpFormat         `parquet:"format,optional"`
	SchemaString     *string           `parquet:"schemaString,optional"`
	PartitionColumns []string          `parquet:"partitionColumns,optional,list"`
	Configuration    map[string]string `parquet:"configuration,optional"`
	CreatedTime      *int64            `parquet:"createdTime,optional"`
}

type cpProtocol struct {
	MinReaderVersion *int32 `parquet:"minReaderVersion,optional"`
	MinWriterVersion *int32 `parquet:"minWriterVersion,optional"`
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

// Checkpoint writes a classic checkpoint of the table's newest version (the
// protocol, metadata, txns, active files and tombstones) and points
// _last_checkpoint at it. Checkpoints only speed up replay; a reader that
// ignores them sees the same table. It returns the checkpointed version
// (-1 for a table without a log, where it writes nothing).
func (t *Table) Checkpoint(ctx context.Context) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	snap, err := t.snapshotLocked(ctx)
	if err != nil {
		return -1, err
	}
	if snap.Version < 0 {
		return -1, nil
	}
	rows := make([]cpRow, 0, 2+len(snap.Txns)+len(snap.Files)+len(snap.Tombstones))
	rows = append(rows, cpRow{Protocol: &cpProtocol{
		MinReaderVersion: ptr(int32(snap.Protocol.MinReaderVersion)), MinWriterVersion: ptr(int32(snap.Protocol.MinWriterVersion))}})
	md := snap.Metadata
	rows = append(rows, cpRow{MetaData: &cpMetaData{
		ID: ptr(md.ID), Name: optStr(md.Name), Description: optStr(md.Description),
		Format:       &cpFormat{Provider: ptr(md.Format.Provider), Options: nonNil(md.Format.Options)},
		SchemaString: ptr(md.SchemaString), PartitionColumns: append([]string{}, md.PartitionColumns...),
		Configuration: nonNil(md.Configuration), CreatedTime: optInt(md.CreatedTime)}})
	for app, v := range snap.Txns {
		rows = append(rows, cpRow{Txn: &cpTxn{AppID: ptr(app), Version: ptr(v)}})
	}
	for _, a := range snap.Files {
		rows = append(rows, cpRow{Add: &cpAdd{
			Path: ptr(EncodePath(a.Path)), PartitionValues: nonNil(a.PartitionValues), Size: ptr(a.Size),
			ModificationTime: ptr(a.ModificationTime), DataChange: ptr(false), Stats: optStr(a.Stats), Tags: a.Tags}})
	}
	for _, r := range snap.Tombstones {
		rows = append(rows, cpRow{Remove: &cpRemove{
			Path: ptr(EncodePath(r.Path)), DeletionTimestamp: optInt(r.DeletionTimestamp), DataChange: ptr(false)}})
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[cpRow](&buf, parquet.Compression(&parquet.Zstd))
	if _, err := w.Write(rows); err != nil {
		return -1, fmt.Errorf("checkpoint %s version %d: %w", t.root, snap.Version, err)
	}
	if err := w.Close(); err != nil {
		return -1, fmt.Errorf("checkpoint %s version %d: %w", t.root, snap.Version, err)
	}
	if err := t.store.Put(ctx, t.CheckpointKey(snap.Version), buf.Bytes()); err != nil {
		return -1, fmt.Errorf("checkpoint %s version %d: %w", t.root, snap.Version, err)
	}
	last, _ := json.Marshal(map[string]any{"version": snap.Version, "size": len(rows), "sizeInBytes": buf.Len(), "numOfAddFiles": len(snap.Files)})
	if err := t.store.Put(ctx, t.LastCheckpointKey(), last); err != nil {
		return -1, fmt.Errorf("checkpoint %s: _last_checkpoint: %w", t.root, err)
	}
	return snap.Version, nil
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

// readCheckpoint replays a classic checkpoint into a state at version.
func (t *Table) readCheckpoint(ctx context.Context, version int64) (st *state, err error) {
	key := t.CheckpointKey(version)
	ra, size, err := t.store.Open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", key, err)
	}
	defer ra.Close()
	f, err := parquet.OpenFile(ra, size)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %v: %w", key, err, ErrCorrupt)
	}
	defer func() {
		if p := recover(); p != nil { // parquet-go panics on unconvertible schemas
			st, err = nil, fmt.Errorf("checkpoint %s: %v: %w", key, p, ErrCorrupt)
		}
	}()
	r := parquet.NewGenericReader[cpRow](f)
	defer r.Close()
	st = newState()
	buf := make([]cpRow, 256)
	for {
		n, rerr := r.Read(buf)
		for _, row := range buf[:n] {
			if err := st.applyCheckpointRow(row); err != nil {
				return nil, fmt.Errorf("checkpoint %s: %v: %w", key, err, ErrCorrupt)
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", key, rerr)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	if st.protocol == nil || st.metadata == nil {
		return nil, fmt.Errorf("checkpoint %s: no protocol or metaData: %w", key, ErrCorrupt)
	}
	if st.protocol.MinReaderVersion > ReaderVersion {
		return nil, fmt.Errorf("checkpoint %s: table needs reader version %d: %w", key, st.protocol.MinReaderVersion, ErrUnsupported)
	}
	st.version = version
	return st, nil
}

func (s *state) applyCheckpointRow(row cpRow) error {
	switch {
	case row.Protocol != nil:
		s.protocol = &Protocol{MinReaderVersion: int(deref(row.Protocol.MinReaderVersion)), MinWriterVersion: int(deref(row.Protocol.MinWriterVersion))}
	case row.MetaData != nil:
		m := row.MetaData
		md := &Metadata{ID: deref(m.ID), Name: deref(m.Name), Description: deref(m.Description),
			SchemaString: deref(m.SchemaString), PartitionColumns: m.PartitionColumns, Configuration: m.Configuration,
			CreatedTime: deref(m.CreatedTime)}
		if md.PartitionColumns == nil {
			md.PartitionColumns = []string{}
		}
		if m.Format != nil {
			md.Format = Format{Provider: deref(m.Format.Provider), Options: m.Format.Options}
		}
		s.metadata = md
	case row.Txn != nil:
		s.txns[deref(row.Txn.AppID)] = deref(row.Txn.Version)
	case row.Add != nil:
		p, err := DecodePath(deref(row.Add.Path))
		if err != nil {
			return err
		}
		s.files[p] = Add{Path: p, PartitionValues: row.Add.PartitionValues, Size: deref(row.Add.Size),
			ModificationTime: deref(row.Add.ModificationTime), DataChange: deref(row.Add.DataChange),
			Stats: deref(row.Add.Stats), Tags: row.Add.Tags}
	case row.Remove != nil:
		p, err := DecodePath(deref(row.Remove.Path))
		if err != nil {
			return err
		}
		s.tombstones[p] = Remove{Path: p, DeletionTimestamp: deref(row.Remove.DeletionTimestamp),
			DataChange: deref(row.Remove.DataChange), ExtendedFileMetadata: deref(row.Remove.ExtendedFileMetadata),
			PartitionValues: row.Remove.PartitionValues, Size: deref(row.Remove.Size)}
	}
	return nil
}
