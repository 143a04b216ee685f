package streams_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/quarrylake/quarry/streams"
)

// goldenNoticeJSON is notice/1 as the committer publishes it: these bytes
// must never change (a new field is a new version).
const goldenNoticeJSON = `{"table":"records","version":12,"high_water":40,"operation":"WRITE","commit_time":"2026-11-29T10:00:00Z","data_change":true,` +
	`"adds":[{"path":"tenant=acme/date=2026-11-29/part-00000000000000000012-00000000000000000040-e1.zstd.parquet","tenant":"acme","date":"2026-11-29","size":2048,"rows":300,"wal":"12-20,40","data_change":true}],` +
	`"removes":[{"path":"tenant=acme/date=2026-10-01/part-1-2-e1.zstd.parquet","tenant":"acme","date":"2026-10-01","size":99,"rows":-1,"data_change":true}]}`

func goldenNotice() *streams.Notice {
	return &streams.Notice{
		Table: "records", Version: 12, HighWater: 40, Operation: "WRITE",
		CommitTime: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), DataChange: true,
		Adds: []streams.NoticeFile{{
			Path:   "tenant=acme/date=2026-11-29/part-00000000000000000012-00000000000000000040-e1.zstd.parquet",
			Tenant: "acme", Date: "2026-11-29", Size: 2048, Rows: 300, WAL: "12-20,40", DataChange: true,
		}},
		Removes: []streams.NoticeFile{{
			Path: "tenant=acme/date=2026-10-01/part-1-2-e1.zstd.parquet", Tenant: "acme", Date: "2026-10-01",
			Size: 99, Rows: -1, DataChange: true,
		}},
	}
}

// goldenNotice2JSON is notice/2 as the committer publishes it for a
// records table partitioned by tenant (no date; min_date and max_date from
// the ts stats) and for a dated one (date, and min_date = max_date = date).
const goldenNotice2JSON = `{"table":"records","version":13,"high_water":41,"operation":"WRITE","commit_time":"2026-11-29T10:00:00Z","data_change":true,` +
	`"adds":[{"path":"tenant=acme/part-00000000000000000041-00000000000000000041-e1.zstd.parquet","tenant":"acme","min_date":"2026-11-28","max_date":"2026-11-29","size":2048,"rows":300,"wal":"41","data_change":true}],` +
	`"removes":[{"path":"tenant=acme/date=2026-10-01/part-1-2-e1.zstd.parquet","tenant":"acme","date":"2026-10-01","min_date":"2026-10-01","max_date":"2026-10-01","size":99,"rows":-1,"data_change":true}]}`

func goldenNotice2() *streams.Notice {
	return &streams.Notice{
		Table: "records", Version: 13, HighWater: 41, Operation: "WRITE",
		CommitTime: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), DataChange: true,
		Adds: []streams.NoticeFile{{
			Path:   "tenant=acme/part-00000000000000000041-00000000000000000041-e1.zstd.parquet",
			Tenant: "acme", MinDate: "2026-11-28", MaxDate: "2026-11-29", Size: 2048, Rows: 300, WAL: "41", DataChange: true,
		}},
		Removes: []streams.NoticeFile{{
			Path: "tenant=acme/date=2026-10-01/part-1-2-e1.zstd.parquet", Tenant: "acme", Date: "2026-10-01",
			MinDate: "2026-10-01", MaxDate: "2026-10-01", Size: 99, Rows: -1, DataChange: true,
		}},
	}
}

func TestGoldenNotice2(t *testing.T) {
	b, err := streams.EncodeNotice(goldenNotice2())
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != goldenNotice2JSON {
		t.Fatalf("notice/2 encoding changed:\n got %s\nwant %s", b, goldenNotice2JSON)
	}
	n, err := streams.DecodeNotice(b)
	if err != nil || !reflect.DeepEqual(n, goldenNotice2()) {
		t.Fatalf("decode: %v\n got %+v\nwant %+v", err, n, goldenNotice2())
	}
	if streams.FormatNotice != "notice/2" {
		t.Errorf("FormatNotice %s", streams.FormatNotice)
	}
}

// TestGoldenNotice: a notice/1 payload (before min_date and max_date) still
// decodes, and a notice without the dates encodes to the same bytes.
func TestGoldenNotice(t *testing.T) {
	b, err := streams.EncodeNotice(goldenNotice())
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != goldenNoticeJSON {
		t.Fatalf("notice/1 encoding changed:\n got %s\nwant %s", b, goldenNoticeJSON)
	}
	n, err := streams.DecodeNotice([]byte(goldenNoticeJSON))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(n, goldenNotice()) {
		t.Fatalf("decode:\n got %+v\nwant %+v", n, goldenNotice())
	}
	if got := streams.NoticeMsgID(streams.TableRecords, 12); got != "records-12" {
		t.Errorf("NoticeMsgID = %q", got)
	}
	if got := streams.NoticeSubject(streams.TableRecords); got != "quarry.notices.records" {
		t.Errorf("NoticeSubject = %q", got)
	}
}

func TestDecodeNoticeRejects(t *testing.T) {
	for _, tt := range []struct{ name, in string }{
		{"not json", `{`},
		{"no table", `{"version":1}`},
		{"negative version", `{"table":"records","version":-1}`},
		{"empty path", `{"table":"records","version":1,"adds":[{"path":"","rows":1}]}`},
		{"absolute path", `{"table":"records","version":1,"removes":[{"path":"/a","rows":1}]}`},
		{"bad rows", `{"table":"records","version":1,"adds":[{"path":"a","rows":-5}]}`},
		{"min_date alone", `{"table":"records","version":1,"adds":[{"path":"a","rows":1,"min_date":"2026-01-01"}]}`},
		{"min_date after max_date", `{"table":"records","version":1,"adds":[{"path":"a","rows":1,"min_date":"2026-01-02","max_date":"2026-01-01"}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := streams.DecodeNotice([]byte(tt.in)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
