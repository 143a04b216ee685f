package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/pqtest"
	"github.com/quarrylake/quarry/internal/syncbuf"
)

// tailLake writes a lake as the committer would: both tables, and each
// call of commit adds one records file (and its templates file).
type tailLake struct {
	t     *testing.T
	dir   string
	store objstore.Store
	rec   *delta.Table
	tpl   *delta.Table
	seq   uint64
}

func newTailLake(t *testing.T) *tailLake {
	dir := t.TempDir()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := &tailLake{t: t, dir: dir, store: store, rec: delta.OpenTable(store, lake.RecordsTable), tpl: delta.OpenTable(store, lake.TemplatesTable)}
	ctx := context.Background()
	if err := l.tpl.Create(ctx, delta.Metadata{SchemaString: lake.TemplatesSchemaString, PartitionColumns: []string{}, Configuration: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	if err := l.rec.Create(ctx, delta.Metadata{SchemaString: lake.RecordsSchemaString(), PartitionColumns: lake.DatedLayout.PartitionColumns(), Configuration: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	return l
}

// commit adds a file of tenant with lines "tail <tenant>-<seq>-<i>".
func (l *tailLake) commit(tenant string, n int) []string {
	ctx := context.Background()
	l.seq++
	var rows []lake.RecordRow
	var lines []string
	for i := range n {
		p := fmt.Sprintf("%s-%d-%d", tenant, l.seq, i)
		rows = append(rows, lake.RecordRow{WALSeq: int64(l.seq), RecordIndex: int32(i), TS: 1_700_000_000_000_000, TemplateID: 1, TemplateVersion: 1, Params: []string{p}, Source: "s"})
		lines = append(lines, "tail "+p)
	}
	name := lake.FileName(l.seq, l.seq, "t")
	tplPath := tenant + "-" + name
	recPath := lake.RecordsFilePath(tenant, "2026-01-01", name)
	tpl := pqtest.Write(l.t, []lake.TemplateRow{{TemplateID: 1, Tenant: tenant, Version: 1, Template: "tail <*>", Kind: "created", WALSeq: int64(l.seq)}})
	rec := pqtest.Write(l.t, rows)
	for _, x := range []struct {
		t    *delta.Table
		path string
		data []byte
		pv   map[string]string
	}{{l.tpl, tplPath, tpl, map[string]string{}}, {l.rec, recPath, rec, map[string]string{"tenant": tenant, "date": "2026-01-01"}}} {
		if err := l.store.Put(ctx, x.t.FileKey(x.path), x.data); err != nil {
			l.t.Fatal(err)
		}
		snap, err := x.t.Snapshot(ctx)
		if err != nil {
			l.t.Fatal(err)
		}
		err = x.t.Commit(ctx, snap.Version+1, []delta.Action{
			{CommitInfo: delta.CommitInfo{"operation": "WRITE"}},
			{Add: &delta.Add{Path: x.path, PartitionValues: x.pv, Size: int64(len(x.data)), ModificationTime: time.Now().UnixMilli(), DataChange: true}},
			{Txn: &delta.Txn{AppID: lake.AppID, Version: int64(l.seq)}},
		})
		if err != nil {
			l.t.Fatal(err)
		}
	}
	return lines
}

// tail runs quarry tail until its stdout holds want lines, then
// interrupts it as Ctrl-C would.
func (l *tailLake) tail(want int, args ...string) (code int, out []string, stderr string) {
	l.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, errb syncbuf.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &errb, getenv: func(string) string { return "" }}
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, e, append([]string{"tail", "--lake", l.dir, "--poll", "20ms", "--log-level", "warn"}, args...))
	}()
	deadline := time.After(30 * time.Second)
	for strings.Count(stdout.String(), "\n") < want {
		select {
		case code := <-done:
			l.t.Fatalf("tail exited %d early: stdout %q stderr %q", code, stdout.String(), errb.String())
		case <-deadline:
			l.t.Fatalf("tail printed %q within 30s, want %d lines", stdout.String(), want)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	code = <-done
	return code, strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n"), errb.String()
}

var resumeRE = regexp.MustCompile(`--from (cursor:\S+)`)

func TestTailFollowsAndResumes(t *testing.T) {
	l := newTailLake(t)
	var all []string
	all = append(all, l.commit("acme", 2)...)
	all = append(all, l.commit("beta", 1)...)
	code, out, stderr := l.tail(3, "--from", "beginning")
	if code != 0 || strings.Join(out, "\n") != strings.Join(all, "\n") {
		t.Fatalf("exit %d, printed %q, want %q (stderr %q)", code, out, all, stderr)
	}
	m := resumeRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no cursor on stderr: %q", stderr)
	}
	more := l.commit("acme", 2)
	code, out, stderr = l.tail(2, "--from", m[1])
	if code != 0 || strings.Join(out, "\n") != strings.Join(more, "\n") {
		t.Fatalf("resumed: exit %d, printed %q, want %q (stderr %q)", code, out, more, stderr)
	}
	// A tenant and a query; jsonl.
	code, out, _ = l.tail(1, "--from", "beginning", "--tenant", "acme", "--format", "jsonl", "acme-3-1")
	if code != 0 || len(out) != 1 || !strings.Contains(out[0], `"line":"tail acme-3-1"`) {
		t.Fatalf("filtered: exit %d, printed %q", code, out)
	}
}

func TestTailBadArguments(t *testing.T) {
	l := newTailLake(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--lake", l.dir, "--from", "soon"}, "--from"},
		{[]string{"--lake", l.dir, "--format", "table"}, `--format "table"`},
		{[]string{"--lake", l.dir, "x | count"}, "cannot aggregate"},
		{[]string{"--lake", l.dir, "--tenant", "a.b"}, "tenant"},
		{[]string{}, "--lake is required"},
	} {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		code := runMain(context.Background(), e, append([]string{"tail"}, tc.args...))
		if code != 2 || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("quarry tail %v: exit %d, stderr %q; want exit 2 saying %q", tc.args, code, errb.String(), tc.msg)
		}
	}
}
