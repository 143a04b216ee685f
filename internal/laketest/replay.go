package laketest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/quarrylake/quarry/internal/objstore"
)

// LiveFile is an active file of a table as the independent replay sees it.
type LiveFile struct {
	Path string // relative to the table root, decoded
	Size int64
}

// Replay is a Delta log replay written apart from internal/delta, the way an
// outside reader does it: start from the checkpoint _last_checkpoint names
// (read with Apache Arrow's Parquet reader), else from version 0, then apply
// the JSON commits after it in order (add, then remove, per path). It
// returns the active files, sorted by path, and the newest version.
// It shares no code with internal/delta, so a checkpoint or commit that
// quarry writes in a shape only quarry reads shows up here.
func Replay(ctx context.Context, store objstore.Store, root string) (files []LiveFile, version int64, err error) {
	logDir := strings.Trim(root, "/") + "/_delta_log/"
	live := map[string]int64{}
	start := int64(0)
	if raw, err := store.Get(ctx, logDir+"_last_checkpoint"); err == nil {
		var lc struct {
			Version *int64 `json:"version"`
			Size    *int64 `json:"size"`
		}
		if err := json.Unmarshal(raw, &lc); err != nil || lc.Version == nil || lc.Size == nil {
			return nil, -1, fmt.Errorf("%s_last_checkpoint %s: needs version and size (%v)", logDir, raw, err)
		}
		n, err := readCheckpointArrow(ctx, store, fmt.Sprintf("%s%020d.checkpoint.parquet", logDir, *lc.Version), live)
		if err != nil {
			return nil, -1, err
		}
		if n != *lc.Size {
			return nil, -1, fmt.Errorf("checkpoint %d holds %d actions, _last_checkpoint says %d", *lc.Version, n, *lc.Size)
		}
		start = *lc.Version + 1
	} else if !errors.Is(err, objstore.ErrNotFound) {
		return nil, -1, err
	}
	infos, err := store.List(ctx, logDir)
	if err != nil {
		return nil, -1, err
	}
	var versions []int64
	for _, in := range infos {
		name := path.Base(in.Key)
		if len(name) != 25 || !strings.HasSuffix(name, ".json") || path.Dir(in.Key)+"/" != logDir {
			continue
		}
		v, err := strconv.ParseInt(name[:20], 10, 64)
		if err == nil && v >= start {
			versions = append(versions, v)
		}
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	version = start - 1
	for _, v := range versions {
		if v != version+1 {
			return nil, -1, fmt.Errorf("%s: version %d missing", logDir, version+1)
		}
		data, err := store.Get(ctx, fmt.Sprintf("%s%020d.json", logDir, v))
		if err != nil {
			return nil, -1, err
		}
		if err := applyJSONCommit(data, live); err != nil {
			return nil, -1, fmt.Errorf("version %d: %w", v, err)
		}
		version = v
	}
	for p, size := range live {
		files = append(files, LiveFile{Path: p, Size: size})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, version, nil
}

func applyJSONCommit(data []byte, live map[string]int64) error {
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var a struct {
			Add *struct {
				Path string `json:"path"`
				Size int64  `json:"size"`
			} `json:"add"`
			Remove *struct {
				Path string `json:"path"`
			} `json:"remove"`
		}
		if err := json.Unmarshal(line, &a); err != nil {
			return err
		}
		switch {
		case a.Add != nil:
			p, err := url.PathUnescape(a.Add.Path)
			if err != nil {
				return err
			}
			live[p] = a.Add.Size
		case a.Remove != nil:
			p, err := url.PathUnescape(a.Remove.Path)
			if err != nil {
				return err
			}
			delete(live, p)
		}
	}
	return nil
}

// readCheckpointArrow adds a checkpoint's add actions to live and returns
// how many actions (non-null rows of any action column) it holds.
func readCheckpointArrow(ctx context.Context, store objstore.Store, key string, live map[string]int64) (int64, error) {
	ra, size, err := store.Open(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("checkpoint %s: %w", key, err)
	}
	defer ra.Close()
	pf, err := file.NewParquetReader(&readerAtSeeker{ReaderAt: ra, size: size})
	if err != nil {
		return 0, fmt.Errorf("checkpoint %s: %w", key, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return 0, fmt.Errorf("checkpoint %s: %w", key, err)
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		return 0, fmt.Errorf("checkpoint %s: %w", key, err)
	}
	defer tbl.Release()
	sc := tbl.Schema()
	for _, want := range []string{"txn", "add", "remove", "metaData", "protocol"} {
		if len(sc.FieldIndices(want)) != 1 {
			return 0, fmt.Errorf("checkpoint %s: no %s column", key, want)
		}
	}
	var actions int64
	for i, f := range sc.Fields() {
		if f.Type.ID() != arrow.STRUCT {
			return 0, fmt.Errorf("checkpoint %s: column %s is %s, not a struct", key, f.Name, f.Type)
		}
		for _, chunk := range tbl.Column(i).Data().Chunks() {
			st := chunk.(*array.Struct)
			actions += int64(st.Len() - st.NullN())
			if f.Name != "add" {
				continue
			}
			typ := st.DataType().(*arrow.StructType)
			pi, ok1 := typ.FieldIdx("path")
			si, ok2 := typ.FieldIdx("size")
			if !ok1 || !ok2 {
				return 0, fmt.Errorf("checkpoint %s: add lacks path or size", key)
			}
			paths, ok1 := st.Field(pi).(*array.String)
			sizes, ok2 := st.Field(si).(*array.Int64)
			if !ok1 || !ok2 {
				return 0, fmt.Errorf("checkpoint %s: add.path %s, add.size %s", key, st.Field(pi).DataType(), st.Field(si).DataType())
			}
			for j := 0; j < st.Len(); j++ {
				if st.IsNull(j) {
					continue
				}
				p, err := url.PathUnescape(paths.Value(j))
				if err != nil {
					return 0, err
				}
				live[p] = sizes.Value(j)
			}
		}
	}
	return actions, nil
}
