// Package lake defines quarry's lake: the layout of its Delta tables, the
// Parquet row types the encoder writes and the readers that serve quarry's
// query and templates commands from committed data only.
//
// Layout under a lake root:
//
//	<lake>/records/_delta_log/<version:020d>.json
//	<lake>/records/tenant=<t>/part-<first:020d>-<last:020d>-<writer>.zstd.parquet
//	<lake>/records/tenant=<t>/date=<yyyy-mm-dd>/part-...  (tables created before issue 10: Layout)
//	<lake>/templates/_delta_log/<version:020d>.json
//	<lake>/templates/part-<first:020d>-<last:020d>-<writer>.zstd.parquet
//	<lake>/progress/_delta_log/<version:020d>.json
//	<lake>/progress/part-<records version:020d>-<progress version:020d>.parquet
//
// first and last are the lowest and highest WAL sequences a file covers;
// writer is the encoder instance, so two encoders never write one name and a
// retry by the same encoder overwrites its own file.
package lake

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/recfile"
)

// RecordRow is one row of a records v2 file (params as a list, one row per
// record in WAL order). The encoder writes records v3 (internal/recfile);
// v2 files of older lakes are still read. The partition columns (tenant,
// and date in a table of DatedLayout) live in the Delta add action, not in
// the file; DatedRecordRow is the v2 row of a table partitioned by tenant.
type RecordRow struct {
	WALSeq          int64             `parquet:"wal_seq"`
	RecordIndex     int32             `parquet:"record_index"`
	TS              int64             `parquet:"ts,timestamp(microsecond:utc)"`
	TemplateID      int64             `parquet:"template_id"`
	TemplateVersion int32             `parquet:"template_version"`
	Params          []string          `parquet:"params,list"`
	Source          string            `parquet:"source"`
	Attrs           map[string]string `parquet:"attrs"`
}

// DatedRecordRow is a records v2 row with the date column, as a table of
// the current layout (partitioned by tenant only) needs in every file: the
// encoder's v2 fallback writes it there. Readers read it as RecordRow.
type DatedRecordRow struct {
	RecordRow
	Date int32 `parquet:"date,date"`
}

// DatedRecordRows are rows with their date (the UTC day of TS).
func DatedRecordRows(rows []RecordRow) []DatedRecordRow {
	out := make([]DatedRecordRow, len(rows))
	for i, r := range rows {
		out[i] = DatedRecordRow{r, recfile.Day(r.TS * 1000)}
	}
	return out
}

// TemplateRow is one row of the templates table: one per template version
// (kind "created" or "changed"), plus one per merge (kind "merged": the
// template was retired into MergedInto; Template is the survivor's text,
// Version the retired one's last version).
//
// Files of templates v3 (written since 2026-12-05) have no previous column,
// and no merged_into column when no row is a merge: they read as "" and 0
// (parquet-go fills a column a file lacks with the zero value), and the
// Delta schema has both nullable (TemplatesSchemaString).
//
// Previous is "" in the files written since templates v2 (docs/formats.md):
// it is derivable, the text of (TemplateID, Version-1) for a changed row and
// of (TemplateID, Version) for a merged one, and was a tenth of a templates
// file. Files written before hold the text; Lake.Templates derives it when a
// changed row has none. The integer columns are DELTA_BINARY_PACKED (their
// values ascend or repeat); readers read either encoding.
type TemplateRow struct {
	TemplateID int64  `parquet:"template_id,delta"`
	Tenant     string `parquet:"tenant"`
	Version    int32  `parquet:"version,delta"`
	Template   string `parquet:"template"`
	Kind       string `parquet:"kind"`
	Previous   string `parquet:"previous"`
	MergedInto int64  `parquet:"merged_into,delta"`
	WALSeq     int64  `parquet:"wal_seq,delta"`
	// Kinds names, per wildcard of Template, the mask that made it ("" for
	// one the miner found itself); nil when no mask made any.
	Kinds []string `parquet:"kinds,optional,list"`
}

// TemplateRowMerged and TemplateRowLive are the columns of a templates v3
// file: TemplateRow without previous, and without merged_into unless a row
// of the file is a merge. The encoder writes its rows through them, and
// readers read a file whose columns they are through them, not through
// parquet-go's conversion of each row to TemplateRow (the bigger part of
// loading the templates).
type TemplateRowMerged struct {
	TemplateID int64    `parquet:"template_id,delta"`
	Tenant     string   `parquet:"tenant"`
	Version    int32    `parquet:"version,delta"`
	Template   string   `parquet:"template"`
	Kind       string   `parquet:"kind"`
	MergedInto int64    `parquet:"merged_into,delta"`
	WALSeq     int64    `parquet:"wal_seq,delta"`
	Kinds      []string `parquet:"kinds,optional,list"`
}

// TemplateRowLive: see TemplateRowMerged.
type TemplateRowLive struct {
	TemplateID int64    `parquet:"template_id,delta"`
	Tenant     string   `parquet:"tenant"`
	Version    int32    `parquet:"version,delta"`
	Template   string   `parquet:"template"`
	Kind       string   `parquet:"kind"`
	WALSeq     int64    `parquet:"wal_seq,delta"`
	Kinds      []string `parquet:"kinds,optional,list"`
}

// TemplateRowMergedBare and TemplateRowLiveBare are the columns of a
// templates v4 file (since 2026-12-05): TemplateRowMerged and
// TemplateRowLive without kinds, which a file has only when some row of
// it has kinds. Readers read a missing kinds as nil.
type TemplateRowMergedBare struct {
	TemplateID int64  `parquet:"template_id,delta"`
	Tenant     string `parquet:"tenant"`
	Version    int32  `parquet:"version,delta"`
	Template   string `parquet:"template"`
	Kind       string `parquet:"kind"`
	MergedInto int64  `parquet:"merged_into,delta"`
	WALSeq     int64  `parquet:"wal_seq,delta"`
}

// TemplateRowLiveBare: see TemplateRowMergedBare.
type TemplateRowLiveBare struct {
	TemplateID int64  `parquet:"template_id,delta"`
	Tenant     string `parquet:"tenant"`
	Version    int32  `parquet:"version,delta"`
	Template   string `parquet:"template"`
	Kind       string `parquet:"kind"`
	WALSeq     int64  `parquet:"wal_seq,delta"`
}

// Merged is r without Previous.
func (r TemplateRow) Merged() TemplateRowMerged {
	return TemplateRowMerged{r.TemplateID, r.Tenant, r.Version, r.Template, r.Kind, r.MergedInto, r.WALSeq, r.Kinds}
}

// Live is r without Previous and MergedInto.
func (r TemplateRow) Live() TemplateRowLive {
	return TemplateRowLive{r.TemplateID, r.Tenant, r.Version, r.Template, r.Kind, r.WALSeq, r.Kinds}
}

func (r TemplateRowMerged) row() TemplateRow {
	return TemplateRow{TemplateID: r.TemplateID, Tenant: r.Tenant, Version: r.Version, Template: r.Template, Kind: r.Kind,
		MergedInto: r.MergedInto, WALSeq: r.WALSeq, Kinds: r.Kinds}
}

func (r TemplateRowLive) row() TemplateRow {
	return TemplateRow{TemplateID: r.TemplateID, Tenant: r.Tenant, Version: r.Version, Template: r.Template, Kind: r.Kind,
		WALSeq: r.WALSeq, Kinds: r.Kinds}
}

// Table roots, relative to the lake root.
const (
	RecordsTable   = "records"
	TemplatesTable = "templates"
)

// RecordsSchemaV2String is the Delta schemaString the records table was
// created with before records v3: the columns of RecordRow.
const RecordsSchemaV2String = `{"type":"struct","fields":[` +
	`{"name":"wal_seq","type":"long","nullable":false,"metadata":{}},` +
	`{"name":"record_index","type":"integer","nullable":false,"metadata":{}},` +
	`{"name":"ts","type":"timestamp","nullable":false,"metadata":{}},` +
	`{"name":"template_id","type":"long","nullable":false,"metadata":{}},` +
	`{"name":"template_version","type":"integer","nullable":false,"metadata":{}},` +
	`{"name":"params","type":{"type":"array","elementType":"string","containsNull":false},"nullable":false,"metadata":{}},` +
	`{"name":"source","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"attrs","type":{"type":"map","keyType":"string","valueType":"string","valueContainsNull":false},"nullable":true,"metadata":{}},` +
	`{"name":"tenant","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"date","type":"date","nullable":false,"metadata":{}}]}`

// RecordsSchemaString is the Delta schemaString of the records table: the
// superset of records v3 (recfile.SchemaString) and v2 (RecordRow), so that
// any Delta reader reads old and new files of one table. Columns only one
// version writes are nullable: a v2 file reads with null kinds and slot
// columns, a v3 file with null params. docs/formats.md has the story.
// Built on first use (a JSON merge of the two schemas), not at package
// initialisation: every process of the one binary runs every linked
// package's init, and a query never needs it.
var RecordsSchemaString = sync.OnceValue(func() string { return recordsSuperset() })

// RecordsSchemaV6String is RecordsSchemaString as it was before records v7
// added the more_text column: tables created since records v3 and before
// it have it (RecordsSchemaUpdate upgrades them).
var RecordsSchemaV6String = sync.OnceValue(func() string { return recordsSuperset("more_text") })

// recordsSuperset builds the superset schema, leaving out the records v3
// columns named in drop.
func recordsSuperset(drop ...string) string {
	type field struct {
		Name     string          `json:"name"`
		Type     json.RawMessage `json:"type"`
		Nullable bool            `json:"nullable"`
		Metadata json.RawMessage `json:"metadata"`
	}
	var v3, v2 struct {
		Type   string  `json:"type"`
		Fields []field `json:"fields"`
	}
	if err := json.Unmarshal([]byte(recfile.SchemaString()), &v3); err != nil {
		panic("recfile.SchemaString: " + err.Error())
	}
	if err := json.Unmarshal([]byte(RecordsSchemaV2String), &v2); err != nil {
		panic("RecordsSchemaV2String: " + err.Error())
	}
	in := map[string]bool{}
	for _, f := range v2.Fields {
		in[f.Name] = true
	}
	var out []field
	have := map[string]bool{}
	for _, f := range v3.Fields {
		if slices.Contains(drop, f.Name) {
			continue
		}
		if !in[f.Name] {
			f.Nullable = true // v2 files lack it
		}
		if f.Name == "tenant" {
			// v2-only columns go before the partition columns.
			for _, g := range v2.Fields {
				if !have[g.Name] && !slices.Contains(DatedLayout.PartitionColumns(), g.Name) && !slices.ContainsFunc(v3.Fields, func(h field) bool { return h.Name == g.Name }) {
					g.Nullable = true // v3 files lack it
					out = append(out, g)
				}
			}
		}
		have[f.Name] = true
		out = append(out, f)
	}
	v3.Fields = out
	b, err := json.Marshal(v3)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// schemaUpdate returns md with current when md has one of the older
// schemas old.
func schemaUpdate(md delta.Metadata, current string, old ...string) (delta.Metadata, bool) {
	if !slices.Contains(old, md.SchemaString) {
		return md, false
	}
	md.SchemaString = current
	return md, true
}

// RecordsSchemaUpdate returns the records table's metadata with
// RecordsSchemaString when md still has an older quarry schema
// (RecordsSchemaV2String, RecordsSchemaV6String), so a table created before
// records v3 (or v7) is upgraded by one metaData action before v3 (v7)
// files are added. ok is false when md needs no change (it is current, or
// not a schema quarry wrote).
func RecordsSchemaUpdate(md delta.Metadata) (delta.Metadata, bool) {
	return schemaUpdate(md, RecordsSchemaString(), RecordsSchemaV2String, RecordsSchemaV6String())
}

// TemplatesSchemaUpdate is RecordsSchemaUpdate for the templates table: a
// table created before the kinds column (TemplatesSchemaV1String) or
// before templates v3 (TemplatesSchemaV2String) gets
// TemplatesSchemaString.
func TemplatesSchemaUpdate(md delta.Metadata) (delta.Metadata, bool) {
	return schemaUpdate(md, TemplatesSchemaString, TemplatesSchemaV1String, TemplatesSchemaV2String)
}

// templatesFieldsV1 are the templates table's columns before kinds.
const templatesFieldsV1 = `{"type":"struct","fields":[` +
	`{"name":"template_id","type":"long","nullable":false,"metadata":{}},` +
	`{"name":"tenant","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"version","type":"integer","nullable":false,"metadata":{}},` +
	`{"name":"template","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"kind","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"previous","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"merged_into","type":"long","nullable":false,"metadata":{}},` +
	`{"name":"wal_seq","type":"long","nullable":false,"metadata":{}}`

// TemplatesSchemaV1String is the templates table's schema before the kinds
// column.
const TemplatesSchemaV1String = templatesFieldsV1 + `]}`

// kindsField is the templates table's kinds column (nullable: null in
// files written before it): per wildcard, the mask that made it ("" for a
// parameter the miner found itself).
const kindsField = `{"name":"kinds","type":{"type":"array","elementType":"string","containsNull":false},"nullable":true,"metadata":{}}`

// TemplatesSchemaV2String is the templates table's schema from the kinds
// column to templates v3: previous and merged_into not nullable.
const TemplatesSchemaV2String = templatesFieldsV1 + `,` + kindsField + `]}`

// TemplatesSchemaString is the Delta schemaString of the templates table:
// since templates v3 (docs/formats.md) previous and merged_into are
// nullable, since a file leaves out previous (always empty since templates
// v2) and merged_into when no row of it is a merge: null reads as "" and 0.
const TemplatesSchemaString = `{"type":"struct","fields":[` +
	`{"name":"template_id","type":"long","nullable":false,"metadata":{}},` +
	`{"name":"tenant","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"version","type":"integer","nullable":false,"metadata":{}},` +
	`{"name":"template","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"kind","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"previous","type":"string","nullable":true,"metadata":{}},` +
	`{"name":"merged_into","type":"long","nullable":true,"metadata":{}},` +
	`{"name":"wal_seq","type":"long","nullable":false,"metadata":{}},` +
	kindsField + `]}`

// Date is the UTC day (yyyy-mm-dd) of a record time: the date partition
// value in a table of DatedLayout, the date column's day otherwise.
func Date(tsNanos int64) string { return time.Unix(0, tsNanos).UTC().Format(time.DateOnly) }

// FileName is the base name of a data file covering WAL sequences first..last
// written by writer.
func FileName(first, last uint64, writer string) string {
	return fmt.Sprintf("part-%020d-%020d-%s.zstd.parquet", first, last, writer)
}

// RecordsFilePath is a records data file's path relative to the table root
// in partition (tenant, date); date is empty in the current layout
// (Part.FilePath).
func RecordsFilePath(tenant, date, name string) string {
	return Part{tenant, date}.FilePath(name)
}
