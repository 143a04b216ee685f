package streams

import (
	"encoding/json"
	"fmt"
	"time"
)

// BatchRef names one mined batch covered by a report.
type BatchRef struct {
	Seq     uint64 `json:"seq"`
	Prev    uint64 `json:"prev"`
	Records int    `json:"records"`
}

// Table names of the lake.
const (
	TableRecords   = "records"
	TableTemplates = "templates"
)

// FileInfo describes one data file an encoder uploaded: enough for the
// committer to write its Delta add action without reading the file.
type FileInfo struct {
	Table string `json:"table"`
	// Path is relative to the table root, with '/' separators, e.g.
	// "tenant=acme/date=2026-11-29/part-00000000000000000012-00000000000000000040-e1a2.zstd.parquet".
	Path             string            `json:"path"`
	Size             int64             `json:"size"`
	PartitionValues  map[string]string `json:"partition_values"`
	NumRecords       int64             `json:"num_records"`
	Stats            string            `json:"stats"` // Delta stats JSON of the file
	ModificationTime int64             `json:"modification_time"`
}

// Report is an encoder's claim (format "report/1", JSON) that the files it
// lists are uploaded and together hold every record of the batches it lists.
// It is published on ReportSubject(Encoder) with Nats-Msg-Id ID.
type Report struct {
	ID        string     `json:"id"`
	Encoder   string     `json:"encoder"`
	Batches   []BatchRef `json:"batches"`
	Files     []FileInfo `json:"files"`
	CreatedAt time.Time  `json:"created_at"`
}

// Verdict is the committer's decision on a report (format "verdict/1",
// JSON), stored in VerdictsBucket under VerdictKey(ReportID).
//
// Accepted: every batch of the report is now owned by its files; the encoder
// acks all of them. Rejected: the encoder deletes its files, acks the batches
// listed in Duplicates (another report owns them) and naks the rest for
// redelivery. The decision is a pure function of the ReportStream order, so
// a committer that takes over re-derives the same verdicts.
type Verdict struct {
	ReportID   string   `json:"report_id"`
	Accepted   bool     `json:"accepted"`
	Duplicates []uint64 `json:"duplicates,omitempty"`
	Reason     string   `json:"reason,omitempty"`
}

// TemplateEvent is published on TemplateSubject(Tenant) (format
// "template/1", JSON) with Nats-Msg-Id TemplateMsgID(ID, Version). A miner
// replay republishes the same events; subscribers de-duplicate on
// (template_id, version).
//
// Kind "merged": the miner found template ID (of Version) to be the same as
// template Into and retired it; later lines of that shape get Into. Template
// is Into's text, Previous ID's. Records mined earlier keep ID and still
// render with (ID, Version) from the templates table. Its Nats-Msg-Id is
// TemplateMergeMsgID(ID, Into).
type TemplateEvent struct {
	Kind     string `json:"kind"` // "created", "changed" or "merged"
	ID       uint64 `json:"template_id"`
	Tenant   string `json:"tenant"`
	Version  uint32 `json:"version"`
	Template string `json:"template"`
	Previous string `json:"previous,omitempty"`
	Into     uint64 `json:"into,omitempty"`
	WALSeq   uint64 `json:"wal_seq"`
}

// Progress is a source's progress fact (format "progress/2", JSON; a
// "progress/1" fact is the same without Tenant), published on
// ProgressSubject(Source) and kept in ProgressBucket. FinalizedUntil is the
// commit time up to which the source is complete in the WAL: a reader knows
// a period is complete when it is final in every source. Tenant is the
// tenant of every frame the source writes ("" in a progress/1 fact).
type Progress struct {
	Source          string    `json:"source"`
	Tenant          string    `json:"tenant,omitempty"`
	Kind            string    `json:"kind"` // "lines" or "mssql"
	CaptureInstance string    `json:"capture_instance,omitempty"`
	LastLSN         string    `json:"last_lsn,omitempty"`
	Offset          uint64    `json:"offset,omitempty"`
	Rows            uint64    `json:"rows"`
	Frames          uint64    `json:"frames"`
	FinalizedUntil  time.Time `json:"finalized_until"`
	UpdatedAt       time.Time `json:"updated_at"`
}

func decodeJSON[T any](b []byte, what string) (*T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
	}
	return &v, nil
}

// DecodeReport decodes and checks a "report/1" payload.
func DecodeReport(b []byte) (*Report, error) {
	r, err := decodeJSON[Report](b, "report")
	if err != nil {
		return nil, err
	}
	if r.ID == "" || len(r.Batches) == 0 {
		return nil, fmt.Errorf("%w: report %q without id or batches", ErrMalformed, r.ID)
	}
	for _, br := range r.Batches {
		if br.Seq == 0 || br.Prev >= br.Seq {
			return nil, fmt.Errorf("%w: report %s: batch seq %d prev %d", ErrMalformed, r.ID, br.Seq, br.Prev)
		}
	}
	for _, f := range r.Files {
		if f.Table != TableRecords && f.Table != TableTemplates {
			return nil, fmt.Errorf("%w: report %s: file %q in unknown table %q", ErrMalformed, r.ID, f.Path, f.Table)
		}
		if f.Path == "" || f.Size <= 0 {
			return nil, fmt.Errorf("%w: report %s: file %q size %d", ErrMalformed, r.ID, f.Path, f.Size)
		}
	}
	return r, nil
}

// DecodeVerdict decodes a "verdict/1" payload.
func DecodeVerdict(b []byte) (*Verdict, error) {
	v, err := decodeJSON[Verdict](b, "verdict")
	if err != nil {
		return nil, err
	}
	if v.ReportID == "" {
		return nil, fmt.Errorf("%w: verdict without report id", ErrMalformed)
	}
	return v, nil
}

// DecodeTemplateEvent decodes a "template/1" payload.
func DecodeTemplateEvent(b []byte) (*TemplateEvent, error) {
	e, err := decodeJSON[TemplateEvent](b, "template event")
	if err != nil {
		return nil, err
	}
	switch e.Kind {
	case "created", "changed":
	case "merged":
		if e.Into == 0 || e.Into == e.ID {
			return nil, fmt.Errorf("%w: merged template event %d into %d", ErrMalformed, e.ID, e.Into)
		}
	default:
		return nil, fmt.Errorf("%w: template event kind %q", ErrMalformed, e.Kind)
	}
	return e, nil
}

// DecodeProgress decodes a "progress/2" or "progress/1" payload.
func DecodeProgress(b []byte) (*Progress, error) {
	p, err := decodeJSON[Progress](b, "progress")
	if err != nil {
		return nil, err
	}
	if p.Source == "" {
		return nil, fmt.Errorf("%w: progress without source", ErrMalformed)
	}
	return p, nil
}
