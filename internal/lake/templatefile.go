package lake

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/recfile"
)

// SortTemplateRows orders rows as a templates file holds them: by
// (wal_seq, template_id, version), the order the miner's events came in.
func SortTemplateRows(rows []TemplateRow) {
	slices.SortStableFunc(rows, func(a, b TemplateRow) int {
		return cmp.Or(cmp.Compare(a.WALSeq, b.WALSeq), cmp.Compare(a.TemplateID, b.TemplateID), cmp.Compare(a.Version, b.Version))
	})
}

// statsStringPrefix is the length Delta truncates string statistics to.
const statsStringPrefix = 32

// EncodeTemplates writes a templates file, as the encoder writes a flush's
// new template versions and the committer's compaction the rows of the
// files it merges: Parquet as encodeParquet but
// with version 1 data pages and no page statistics, its footer trimmed
// (recfile.TrimFooter: no page index, no chunk statistics). The page index and the statistics of the
// template texts were a fifth of a small file (Loghub 2k datasets: 50,101
// to 40,964 bytes over 11 tenants); readers read it as before. It is
// compressed with recfile.ZstdHigh (zstd best or default, whichever frame
// is smaller): written once and kept, a few KB, so best costs little CPU
// (40,777 to 39,870 bytes over the 11 tenants). Since templates v2 its
// pages have no statistics (parquet-go wrote each page's min and max in
// its header: the longest template texts twice), the previous column is
// empty (templateRows) and the integer columns are DELTA_BINARY_PACKED
// (TemplateRow): 39,492 to 29,476 bytes over the 11 tenants. Since
// 2026-12-05 it keeps no chunk statistics (it kept template_id's and
// wal_seq's) and so no column_orders: a templates file is one row group,
// and the add action's stats (TemplateStats) bound template_id, version
// and wal_seq per file for any Delta reader; nothing read the footer's
// (11 Loghub tenants: 759 bytes).
//
// Templates v3 (since 2026-12-05): no previous column (a row's Previous is
// written only in the rare file where one is set: a row from elsewhere
// than templateRows), and no merged_into column unless a row is a merge
// (lake.TemplatesSchemaString has both nullable; readers read a missing
// column as "" and 0). Each column cost its schema element, chunk
// metadata, page header and a few bytes of values: 11 Loghub tenants
// 29,002 to 27,828 bytes (7 of them have a merge, so a merged_into
// column).
//
// Since 2026-12-05 a busy flush (high false: the encoder's highCompression)
// compresses it with recfile.ZstdBetter instead: ZstdHigh's best level
// writes 34 MB of match tables at random for a few KB, cold between
// flushes (0.28 to 0.33 s of a quarry run of 590,553 lines, 3% of its
// CPU); better costs 27,553 to 28,206 bytes over the 11 Loghub tenants
// (RECFILE_LEVERS=1 TestSizeTemplates). An idle flush keeps ZstdHigh.
func EncodeTemplates(rows []TemplateRow, high bool) ([]byte, error) {
	c := recfile.ZstdBetter
	if high {
		c = recfile.ZstdHigh
	}
	previous, merged, kinds := false, false, false
	for _, r := range rows {
		previous = previous || r.Previous != ""
		merged = merged || r.MergedInto != 0
		kinds = kinds || r.Kinds != nil
	}
	var data []byte
	var err error
	switch {
	case previous:
		data, err = writeTemplates(rows, c)
	case merged && kinds:
		data, err = writeTemplates(convertRows(rows, mergedOut), c)
	case merged:
		data, err = writeTemplates(convertRows(rows, mergedBareOut), c)
	case kinds:
		data, err = writeTemplates(convertRows(rows, liveOut), c)
	default:
		data, err = writeTemplates(convertRows(rows, liveBareOut), c)
	}
	if err != nil {
		return nil, err
	}
	return recfile.TrimFooter(data)
}

// templateRowLive and templateRowMerged are TemplateRowLive and
// TemplateRowMerged as EncodeTemplates writes them: the same columns, with
// tenant (one value a file) and kind (created, changed, merged)
// dictionary-encoded instead of PLAIN (since 2026-12-05). A dictionary
// encoding is not in a Parquet schema, so readers read them through the
// lake types as before. Measured on the templates files of 20 lakes (11
// Loghub 2k datasets, this machine's dpkg, apt, alternatives and dockerd
// logs, a build log; re-encoded from the files quarry run wrote): 51,709
// to 50,941 bytes, every file smaller (wal_seq as a dictionary, or
// template DELTA_BYTE_ARRAY, larger). writeTemplates names the file's
// schema root "templates" (it was the Go type's name, TemplateRowLive):
// 50,941 to 50,821.
type templateRowLive struct {
	TemplateID int64    `parquet:"template_id,delta"`
	Tenant     string   `parquet:"tenant,dict"`
	Version    int32    `parquet:"version,delta"`
	Template   string   `parquet:"template"`
	Kind       string   `parquet:"kind,dict"`
	WALSeq     int64    `parquet:"wal_seq,delta"`
	Kinds      []string `parquet:"kinds,optional,list"`
}

type templateRowMerged struct {
	TemplateID int64    `parquet:"template_id,delta"`
	Tenant     string   `parquet:"tenant,dict"`
	Version    int32    `parquet:"version,delta"`
	Template   string   `parquet:"template"`
	Kind       string   `parquet:"kind,dict"`
	MergedInto int64    `parquet:"merged_into,delta"`
	WALSeq     int64    `parquet:"wal_seq,delta"`
	Kinds      []string `parquet:"kinds,optional,list"`
}

// templateRowLiveBare and templateRowMergedBare are templateRowLive and
// templateRowMerged without the kinds column, for a file in which no row
// has kinds (templates v4, since 2026-12-05; TemplateRowLiveBare):
// no mask made a wildcard of any of its templates, as with the default
// mining config. A column of nulls still cost its schema elements (a LIST
// is three), its chunk metadata, a page header and the page's definition
// levels: 118-126 bytes a file; the templates files of the 11 Loghub 2k
// lakes of quarry run 27,009 to 25,659 bytes, alternatives.log's 1,563 to
// 1,441 (3.4% of its zstd -3 size; docs/benchmarks.md, "Lake size: levers
// of the late evening").
type templateRowLiveBare struct {
	TemplateID int64  `parquet:"template_id,delta"`
	Tenant     string `parquet:"tenant,dict"`
	Version    int32  `parquet:"version,delta"`
	Template   string `parquet:"template"`
	Kind       string `parquet:"kind,dict"`
	WALSeq     int64  `parquet:"wal_seq,delta"`
}

type templateRowMergedBare struct {
	TemplateID int64  `parquet:"template_id,delta"`
	Tenant     string `parquet:"tenant,dict"`
	Version    int32  `parquet:"version,delta"`
	Template   string `parquet:"template"`
	Kind       string `parquet:"kind,dict"`
	MergedInto int64  `parquet:"merged_into,delta"`
	WALSeq     int64  `parquet:"wal_seq,delta"`
}

func liveBareOut(r TemplateRow) templateRowLiveBare {
	return templateRowLiveBare{r.TemplateID, r.Tenant, r.Version, r.Template, r.Kind, r.WALSeq}
}

func mergedBareOut(r TemplateRow) templateRowMergedBare {
	return templateRowMergedBare{r.TemplateID, r.Tenant, r.Version, r.Template, r.Kind, r.MergedInto, r.WALSeq}
}

func liveOut(r TemplateRow) templateRowLive {
	return templateRowLive{r.TemplateID, r.Tenant, r.Version, r.Template, r.Kind, r.WALSeq, r.Kinds}
}

func mergedOut(r TemplateRow) templateRowMerged {
	return templateRowMerged{r.TemplateID, r.Tenant, r.Version, r.Template, r.Kind, r.MergedInto, r.WALSeq, r.Kinds}
}

func convertRows[T any](rows []TemplateRow, f func(TemplateRow) T) []T {
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out
}

// writeTemplates writes rows as a templates file before its footer is
// trimmed: codec c, version 1 data pages, no page statistics.
func writeTemplates[T any](rows []T, c compress.Codec) ([]byte, error) {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, parquet.NewSchema("templates", parquet.SchemaOf(new(T))), parquet.Compression(c),
		parquet.DataPageVersion(1), parquet.DataPageStatistics(false), parquet.CreatedBy("quarry", "1", ""))
	if _, err := w.Write(rows); err != nil {
		return nil, fmt.Errorf("write parquet rows: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("close parquet writer: %w", err)
	}
	return buf.Bytes(), nil
}

// fileStats collects the Delta statistics of one data file.
type fileStats struct {
	NumRecords int64
	MinValues  map[string]any
	MaxValues  map[string]any
	NullCount  map[string]int64
}

func (s *fileStats) json() string {
	return delta.StatsJSON(s.NumRecords, s.MinValues, s.MaxValues, s.NullCount)
}

// RecordRowStats computes the Delta stats of a records v2 file (the
// encoder's fallback): wal_seq,
// record_index, ts, template_id, template_version and source. Timestamps are
// ISO-8601 UTC with milliseconds; the maximum is rounded up to the next
// millisecond so it stays an upper bound. Strings keep Delta's 32-character
// prefix for the minimum; a longer maximum is left out, since a truncated
// maximum would not bound the column.
func RecordRowStats(rows []RecordRow) string {
	s := fileStats{NumRecords: int64(len(rows)), MinValues: map[string]any{}, MaxValues: map[string]any{},
		NullCount: map[string]int64{"wal_seq": 0, "record_index": 0, "ts": 0, "template_id": 0, "template_version": 0, "source": 0}}
	if len(rows) == 0 {
		return s.json()
	}
	r0 := rows[0]
	minSeq, maxSeq := r0.WALSeq, r0.WALSeq
	minIdx, maxIdx := r0.RecordIndex, r0.RecordIndex
	minTS, maxTS := r0.TS, r0.TS
	minTpl, maxTpl := r0.TemplateID, r0.TemplateID
	minVer, maxVer := r0.TemplateVersion, r0.TemplateVersion
	minSrc, maxSrc := r0.Source, r0.Source
	for _, r := range rows[1:] {
		minSeq, maxSeq = min(minSeq, r.WALSeq), max(maxSeq, r.WALSeq)
		minIdx, maxIdx = min(minIdx, r.RecordIndex), max(maxIdx, r.RecordIndex)
		minTS, maxTS = min(minTS, r.TS), max(maxTS, r.TS)
		minTpl, maxTpl = min(minTpl, r.TemplateID), max(maxTpl, r.TemplateID)
		minVer, maxVer = min(minVer, r.TemplateVersion), max(maxVer, r.TemplateVersion)
		minSrc, maxSrc = min(minSrc, r.Source), max(maxSrc, r.Source)
	}
	s.MinValues["wal_seq"], s.MaxValues["wal_seq"] = minSeq, maxSeq
	s.MinValues["record_index"], s.MaxValues["record_index"] = minIdx, maxIdx
	s.MinValues["ts"], s.MaxValues["ts"] = time.UnixMicro(minTS), time.UnixMicro(ceilDiv(maxTS, 1000)*1000)
	s.MinValues["template_id"], s.MaxValues["template_id"] = minTpl, maxTpl
	s.MinValues["template_version"], s.MaxValues["template_version"] = minVer, maxVer
	setStringStats(&s, "source", minSrc, maxSrc)
	return s.json()
}

// TemplateStats computes the Delta stats of a templates file: template_id,
// version and wal_seq, which compaction plans by, and tenant.
func TemplateStats(rows []TemplateRow) string {
	s := fileStats{NumRecords: int64(len(rows)), MinValues: map[string]any{}, MaxValues: map[string]any{},
		NullCount: map[string]int64{"template_id": 0, "tenant": 0, "version": 0, "wal_seq": 0}}
	if len(rows) == 0 {
		return s.json()
	}
	r0 := rows[0]
	minID, maxID := r0.TemplateID, r0.TemplateID
	minVer, maxVer := r0.Version, r0.Version
	minSeq, maxSeq := r0.WALSeq, r0.WALSeq
	minTen, maxTen := r0.Tenant, r0.Tenant
	for _, r := range rows[1:] {
		minID, maxID = min(minID, r.TemplateID), max(maxID, r.TemplateID)
		minVer, maxVer = min(minVer, r.Version), max(maxVer, r.Version)
		minSeq, maxSeq = min(minSeq, r.WALSeq), max(maxSeq, r.WALSeq)
		minTen, maxTen = min(minTen, r.Tenant), max(maxTen, r.Tenant)
	}
	s.MinValues["template_id"], s.MaxValues["template_id"] = minID, maxID
	s.MinValues["version"], s.MaxValues["version"] = minVer, maxVer
	s.MinValues["wal_seq"], s.MaxValues["wal_seq"] = minSeq, maxSeq
	setStringStats(&s, "tenant", minTen, maxTen)
	return s.json()
}

func setStringStats(s *fileStats, col, lo, hi string) {
	s.MinValues[col] = truncatePrefix(lo, statsStringPrefix)
	if utf8.RuneCountInString(hi) <= statsStringPrefix {
		s.MaxValues[col] = hi
	}
}

// truncatePrefix returns the first n runes of s.
func truncatePrefix(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }
