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
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := streams.DecodeNotice([]byte(tt.in)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
