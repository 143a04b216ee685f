package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
)

func statusRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code = runMain(context.Background(), e, append([]string{"status"}, args...))
	return code, out.String(), errb.String()
}

// statusLake writes a lake with records at high-water 42 (checkpointed at
// version 1) and, when withProgress, a progress table with one source.
func statusLake(t *testing.T, withProgress bool) (dir string, fin time.Time) {
	t.Helper()
	ctx := context.Background()
	dir = t.TempDir()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range []struct {
		name, schema string
		parts        []string
	}{
		{lake.RecordsTable, lake.RecordsSchemaString(), lake.DatedLayout.PartitionColumns()},
		{lake.TemplatesTable, lake.TemplatesSchemaString, []string{}},
	} {
		if err := delta.OpenTable(store, tb.name).Create(ctx, delta.Metadata{SchemaString: tb.schema, PartitionColumns: tb.parts, Configuration: map[string]string{}}); err != nil {
			t.Fatal(err)
		}
	}
	rec := delta.OpenTable(store, lake.RecordsTable)
	for v := int64(1); v <= 2; v++ {
		if err := rec.Commit(ctx, v, []delta.Action{{Txn: &delta.Txn{AppID: lake.AppID, Version: 40 + v}}}); err != nil {
			t.Fatal(err)
		}
		if v == 1 {
			if _, err := rec.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	fin = time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC)
	if !withProgress {
		return dir, fin
	}
	pt := delta.OpenTable(store, lake.ProgressTable)
	if err := pt.Create(ctx, delta.Metadata{SchemaString: lake.ProgressSchemaString, PartitionColumns: []string{}, Configuration: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	data, err := lake.EncodeProgress([]lake.ProgressRow{{Source: "web-1", Tenant: "acme", FinalizedUntil: fin, WALSeq: 41, HighWater: 42, Version: 2, CommittedAt: fin}})
	if err != nil {
		t.Fatal(err)
	}
	path := lake.ProgressFilePath(2, 1)
	if err := store.Put(ctx, pt.FileKey(path), data); err != nil {
		t.Fatal(err)
	}
	if err := pt.Commit(ctx, 1, []delta.Action{{Add: &delta.Add{Path: path, PartitionValues: map[string]string{}, Size: int64(len(data)), DataChange: true}}}); err != nil {
		t.Fatal(err)
	}
	return dir, fin
}

func TestStatus(t *testing.T) {
	dir, fin := statusLake(t, true)
	code, out, errs := statusRun(t, "--lake", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"high-water 42",
		"records 2 1",
		"templates 0 -",
		"progress 1 -",
		"web-1 acme " + fin.Format(time.RFC3339Nano) + " 41 42 2",
	} {
		if !strings.Contains(squeeze(out), want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}

	code, out, errs = statusRun(t, "--lake", dir, "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errs)
	}
	var st lake.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if st.HighWater != 42 || len(st.Tables) != 3 || st.Tables[0] != (lake.TableStatus{Table: "records", Version: 2, Checkpoint: 1}) {
		t.Fatalf("--json: %+v", st)
	}
	if len(st.Progress) != 1 || st.Progress[0].Source != "web-1" || !st.Progress[0].FinalizedUntil.Equal(fin) {
		t.Fatalf("--json progress: %+v", st.Progress)
	}
}

func TestStatusWithoutProgressTable(t *testing.T) {
	dir, _ := statusLake(t, false)
	code, out, errs := statusRun(t, "--lake", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(squeeze(out), "progress - -") || !strings.Contains(out, "no source progress recorded yet") {
		t.Errorf("status of a lake without a progress table:\n%s", out)
	}
	code, out, _ = statusRun(t, "--lake", dir, "--json")
	if code != 0 || !strings.Contains(out, `"progress": []`) {
		t.Errorf("--json: exit %d\n%s", code, out)
	}
	if code, _, errs := statusRun(t, "--lake", t.TempDir()+"/nope"); code != 2 || !strings.Contains(errs, "no such directory") {
		t.Errorf("missing lake: exit %d, %s", code, errs)
	}
}

// squeeze collapses each line's runs of blanks to one space.
func squeeze(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(strings.Join(strings.Fields(line), " "))
		b.WriteByte('\n')
	}
	return b.String()
}
