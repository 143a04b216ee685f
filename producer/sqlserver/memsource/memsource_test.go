package memsource

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/quarrylake/quarry/producer/sqlserver"
)

var cols = []sqlserver.Column{{Name: "id", Type: "int"}, {Name: "msg", Type: "nvarchar"}}

func readAll(t *testing.T, s sqlserver.Snapshot, chunk int) []string {
	t.Helper()
	var out []string
	var after []any
	for {
		rows, err := s.Chunk(context.Background(), after, chunk)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			out = append(out, r.Values[0].Str+"="+r.Values[1].Str)
			after = r.Key
		}
		if len(rows) < chunk {
			return out
		}
	}
}

func TestSnapshotReadsAsOfItsLSN(t *testing.T) {
	for _, tc := range []struct {
		iso  sqlserver.SnapshotIsolation
		want string
	}{
		// The image as of the snapshot's LSN, whatever commits between chunks.
		{sqlserver.IsolationSnapshot, "0=r0,1=r1,2=r2,3=r3,4=r4,5=r5"},
		// Read committed sees each chunk's newest rows: 1 (deleted after the
		// first chunk) as of then, 4 updated and 6 inserted after the
		// snapshot's LSN.
		{sqlserver.IsolationReadCommitted, "0=r0,1=r1,2=r2,3=r3,4=new4,5=r5,6=r6"},
	} {
		t.Run(string(tc.iso), func(t *testing.T) {
			db := New()
			db.CreateTable("dbo", "t", cols, "id")
			db.EnableCDC("dbo", "t", "dbo_t")
			tx := db.Begin()
			for i := 0; i < 6; i++ {
				tx.Insert("dbo", "t", map[string]any{"id": i, "msg": fmt.Sprintf("r%d", i)})
			}
			l := tx.Commit()
			ci := sqlserver.CaptureInstance{Name: "dbo_t", SourceSchema: "dbo", SourceTable: "t", Columns: cols, KeyColumns: []string{"id"}}
			s, err := db.BeginSnapshot(context.Background(), ci, tc.iso)
			if err != nil {
				t.Fatal(err)
			}
			if s.LSN() != l || s.CommitTime().IsZero() {
				t.Fatalf("lsn %s want %s, commit %v", s.LSN(), l, s.CommitTime())
			}
			n := 0
			db.Hook(MethodSnapshotChunk, func(string) {
				n++
				if n == 2 { // between the first and second chunk
					db.Begin().Delete("dbo", "t", 1).Update("dbo", "t", []any{4}, map[string]any{"msg": "new4"}).
						Insert("dbo", "t", map[string]any{"id": 6, "msg": "r6"}).Commit()
					db.Begin().Update("dbo", "t", []any{4}, map[string]any{"msg": "newer4"}).Commit()
					db.Begin().Update("dbo", "t", []any{4}, map[string]any{"msg": "new4"}).Insert("dbo", "t", map[string]any{"id": 1, "msg": "back1"}).Commit()
					db.Begin().Delete("dbo", "t", 1).Commit()
				}
			})
			got := readAll(t, s, 2)
			if strings.Join(got, ",") != tc.want {
				t.Fatalf("got %v want %s", got, tc.want)
			}
			if db.Rows("dbo", "t") != 6 {
				t.Fatalf("rows %d", db.Rows("dbo", "t"))
			}
			s.Close()
			if db.OpenSnapshots() != 0 {
				t.Fatal("snapshot still open")
			}
			// Closed: the next commit drops the old versions.
			db.Hook(MethodSnapshotChunk, nil)
			db.Begin().Update("dbo", "t", []any{4}, map[string]any{"msg": "last"}).Commit()
			db.mu.Lock()
			nv := len(db.tables["dbo.t"].rows["[]interface {}{4}"])
			db.mu.Unlock()
			if nv != 1 {
				t.Fatalf("%d versions kept", nv)
			}
		})
	}
}

func TestSnapshotIsolationOff(t *testing.T) {
	db := New()
	db.CreateTable("dbo", "t", cols, "id")
	db.CreateTable("dbo", "nokey", cols)
	db.SetSnapshotIsolation(false)
	ci := sqlserver.CaptureInstance{Name: "dbo_t", SourceSchema: "dbo", SourceTable: "t", Columns: cols, KeyColumns: []string{"id"}}
	if _, err := db.BeginSnapshot(context.Background(), ci, sqlserver.IsolationSnapshot); !errors.Is(err, sqlserver.ErrSnapshotIsolation) ||
		!strings.Contains(err.Error(), "ALLOW_SNAPSHOT_ISOLATION ON") {
		t.Fatalf("err %v", err)
	}
	if s, err := db.BeginSnapshot(context.Background(), ci, sqlserver.IsolationReadCommitted); err != nil {
		t.Fatalf("read committed: %v", err)
	} else {
		s.Close()
	}
	ci.SourceTable = "nokey"
	if _, err := db.BeginSnapshot(context.Background(), ci, sqlserver.IsolationReadCommitted); !errors.Is(err, sqlserver.ErrNoKey) {
		t.Fatalf("no key: %v", err)
	}
}
