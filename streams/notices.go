package streams

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// NoticeStream holds commit notices: one per Delta commit of a table,
// published by the committer after the commit is durable. Limits retention
// by age (Config.NoticeMaxAge); a follower that falls behind it reads the
// Delta log instead, which is the truth the notices only announce.
const NoticeStream = "QUARRY_NOTICES"

// NoticeSubjects matches every commit notice subject.
const NoticeSubjects = "quarry.notices.>"

// FormatNotice is the format of a commit notice. notice/2 adds the files'
// min_date and max_date; DecodeNotice reads notice/1 as well (without
// them).
const FormatNotice = "notice/2"

// NoticeSubject is the subject of table's commit notices ("records", "templates").
func NoticeSubject(table string) string { return "quarry.notices." + table }

// NoticeMsgID is the Nats-Msg-Id of table's notice of version, e.g.
// "records-12": a notice published twice (a retry, a rebuild after a
// crash) within the duplicate window is stored once.
func NoticeMsgID(table string, version int64) string {
	return table + "-" + strconv.FormatInt(version, 10)
}

// Notice announces one Delta commit (format "notice/2", JSON), published on
// NoticeSubject(Table) with Nats-Msg-Id NoticeMsgID(Table, Version). It is
// derived from the commit's actions alone, so a notice rebuilt from the
// Delta log equals the one the committer would have published.
//
// DataChange is false when no action of the commit changes the table's data
// (a compaction rewrite, a schema update): a follower delivers rows only
// from adds with DataChange true. Removes with DataChange true are retention
// removals: those rows are gone, not moved.
type Notice struct {
	Table   string `json:"table"`
	Version int64  `json:"version"`
	// HighWater is the committer's high-water after the commit (the txn
	// version of appId "quarry"); 0 when the commit carries no txn.
	HighWater  uint64    `json:"high_water"`
	Operation  string    `json:"operation,omitempty"`
	CommitTime time.Time `json:"commit_time"`
	DataChange bool      `json:"data_change"`
	// Adds are in the commit's order, which is the order a follower
	// delivers them in.
	Adds    []NoticeFile `json:"adds"`
	Removes []NoticeFile `json:"removes"`
}

// NoticeFile is one file a commit added or removed.
type NoticeFile struct {
	Path   string `json:"path"` // relative to the table root
	Tenant string `json:"tenant,omitempty"`
	// Date is the file's date partition: set only in a records table
	// partitioned by (tenant, date), the layout before issue 10.
	Date string `json:"date,omitempty"`
	// MinDate and MaxDate (notice/2) are the first and last UTC day
	// (yyyy-mm-dd) of the file's rows, from its date partition or its ts
	// stats; empty when unknown (and in notice/1).
	MinDate string `json:"min_date,omitempty"`
	MaxDate string `json:"max_date,omitempty"`
	Size    int64  `json:"size"`
	// Rows is the file's record count from its stats; -1 when unknown.
	Rows int64 `json:"rows"`
	// WAL is the set of WAL sequences the file covers, as sorted
	// comma-separated ranges ("5-9,12"); empty when unknown.
	WAL        string `json:"wal,omitempty"`
	DataChange bool   `json:"data_change"`
}

// DecodeNotice decodes and checks a "notice/2" or "notice/1" payload.
func DecodeNotice(b []byte) (*Notice, error) {
	n, err := decodeJSON[Notice](b, "notice")
	if err != nil {
		return nil, err
	}
	if n.Table == "" || n.Version < 0 {
		return nil, fmt.Errorf("%w: notice of table %q version %d", ErrMalformed, n.Table, n.Version)
	}
	for _, f := range append(n.Adds[:len(n.Adds):len(n.Adds)], n.Removes...) {
		if f.Path == "" || strings.HasPrefix(f.Path, "/") || f.Rows < -1 {
			return nil, fmt.Errorf("%w: notice %s-%d: file %q rows %d", ErrMalformed, n.Table, n.Version, f.Path, f.Rows)
		}
		if (f.MinDate == "") != (f.MaxDate == "") || f.MinDate > f.MaxDate {
			return nil, fmt.Errorf("%w: notice %s-%d: file %q dates %q..%q", ErrMalformed, n.Table, n.Version, f.Path, f.MinDate, f.MaxDate)
		}
	}
	return n, nil
}

// EncodeNotice encodes n as "notice/2".
func EncodeNotice(n *Notice) ([]byte, error) {
	if n.Adds == nil {
		n.Adds = []NoticeFile{}
	}
	if n.Removes == nil {
		n.Removes = []NoticeFile{}
	}
	return json.Marshal(n)
}
