package recfile

// v2RecordRow and v2TemplateRow are the records v2 and templates rows
// (lake.RecordRow, lake.TemplateRow) the size comparisons write. They are
// copied, not imported: internal/lake imports this package to read v3
// files, so its tests cannot import internal/lake.
type v2RecordRow struct {
	WALSeq          int64             `parquet:"wal_seq"`
	RecordIndex     int32             `parquet:"record_index"`
	TS              int64             `parquet:"ts,timestamp(microsecond:utc)"`
	TemplateID      int64             `parquet:"template_id"`
	TemplateVersion int32             `parquet:"template_version"`
	Params          []string          `parquet:"params,list"`
	Source          string            `parquet:"source"`
	Attrs           map[string]string `parquet:"attrs"`
}

type v2TemplateRow struct {
	TemplateID int64  `parquet:"template_id,delta"`
	Tenant     string `parquet:"tenant"`
	Version    int32  `parquet:"version,delta"`
	Template   string `parquet:"template"`
	Kind       string `parquet:"kind"`
	Previous   string `parquet:"previous"`
	MergedInto int64  `parquet:"merged_into,delta"`
	WALSeq     int64  `parquet:"wal_seq,delta"`
}
