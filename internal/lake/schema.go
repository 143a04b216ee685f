// Package lake defines quarry's lake: the layout of its two Delta tables, the
// Parquet row types the encoder writes and the readers that serve quarry's
// query and templates commands from committed data only.
//
// Layout under a lake root:
//
//	<lake>/records/_delta_log/<version:020d>.json
//	<lake>/records/tenant=<t>/date=<yyyy-mm-dd>/part-<first:020d>-<last:020d>-<writer>.zstd.parquet
//	<lake>/templates/_delta_log/<version:020d>.json
//	<lake>/templates/part-<first:020d>-<last:020d>-<writer>.zstd.parquet
//
// first and last are the lowest and highest WAL sequences a file covers;
// writer is the encoder instance, so two encoders never write one name and a
// retry by the same encoder overwrites its own file.
package lake

import (
	"fmt"
	"net/url"
	"path"
	"time"
)

// RecordRow is one row of the records table's Parquet files. The partition
// columns tenant and date live in the Delta add action, not in the file.
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

// TemplateRow is one row of the templates table: one per template version
// (kind "created" or "changed"), plus one per merge (kind "merged": the
// template was retired into MergedInto; Template is the survivor's text,
// Previous the retired one's, Version the retired one's last version).
type TemplateRow struct {
	TemplateID int64  `parquet:"template_id"`
	Tenant     string `parquet:"tenant"`
	Version    int32  `parquet:"version"`
	Template   string `parquet:"template"`
	Kind       string `parquet:"kind"`
	Previous   string `parquet:"previous"`
	MergedInto int64  `parquet:"merged_into"`
	WALSeq     int64  `parquet:"wal_seq"`
}

// Table roots, relative to the lake root.
const (
	RecordsTable   = "records"
	TemplatesTable = "templates"
)

// RecordsPartitionColumns are the records table's partition columns.
var RecordsPartitionColumns = []string{"tenant", "date"}

// RecordsSchemaString is the Delta schemaString of the records table.
const RecordsSchemaString = `{"type":"struct","fields":[` +
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

// TemplatesSchemaString is the Delta schemaString of the templates table.
const TemplatesSchemaString = `{"type":"struct","fields":[` +
	`{"name":"template_id","type":"long","nullable":false,"metadata":{}},` +
	`{"name":"tenant","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"version","type":"integer","nullable":false,"metadata":{}},` +
	`{"name":"template","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"kind","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"previous","type":"string","nullable":false,"metadata":{}},` +
	`{"name":"merged_into","type":"long","nullable":false,"metadata":{}},` +
	`{"name":"wal_seq","type":"long","nullable":false,"metadata":{}}]}`

// Date is the value of the date partition for a record time (UTC).
func Date(tsNanos int64) string { return time.Unix(0, tsNanos).UTC().Format(time.DateOnly) }

// FileName is the base name of a data file covering WAL sequences first..last
// written by writer.
func FileName(first, last uint64, writer string) string {
	return fmt.Sprintf("part-%020d-%020d-%s.zstd.parquet", first, last, writer)
}

// RecordsFilePath is a records data file's path relative to the table root:
// Hive-style partition directories with escaped values, as Delta expects.
func RecordsFilePath(tenant, date, name string) string {
	return path.Join("tenant="+url.PathEscape(tenant), "date="+url.PathEscape(date), name)
}
