package committer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
)

// createRecords creates the records table as another Delta writer would,
// with conf as its metaData.configuration.
func (e *env) createRecords(conf map[string]string) *delta.Table {
	e.t.Helper()
	tbl := delta.OpenTable(e.local, lake.RecordsTable)
	err := tbl.Create(context.Background(), delta.Metadata{SchemaString: lake.RecordsSchemaString(),
		PartitionColumns: lake.CurrentLayout.PartitionColumns(), Configuration: conf})
	if err != nil {
		e.t.Fatal(err)
	}
	return tbl
}

// TestLifecycleRule: a table's delta.checkpointInterval,
// delta.logRetentionDuration and delta.deletedFileRetentionDuration win over
// the committer's defaults, a value set in the configuration wins over the
// table's, and an unreadable property is reported and ignored.
func TestLifecycleRule(t *testing.T) {
	e := newEnv(t)
	tbl := e.createRecords(map[string]string{delta.PropCheckpointInterval: "2",
		delta.PropLogRetention: "interval 2 hours", delta.PropDeletedFileRetention: "interval 10 days"})
	if _, err := tbl.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	resolve := func(cfg Config) (lifecycle, error) {
		c, err := New(cfg, Deps{JS: e.js, Store: e.local})
		if err != nil {
			t.Fatal(err)
		}
		return c.lifecycle(tbl)
	}
	got, err := resolve(testConfig("c"))
	if want := (lifecycle{2, 2 * time.Hour, 10 * 24 * time.Hour}); err != nil || got != want {
		t.Errorf("defaults against the table's properties: %+v, %v; want the table's %+v", got, err, want)
	}
	cfg := testConfig("c")
	cfg.CheckpointInterval, cfg.LogRetention = 5, 3*time.Hour
	got, err = resolve(cfg)
	if want := (lifecycle{5, 3 * time.Hour, 10 * 24 * time.Hour}); err != nil || got != want {
		t.Errorf("explicit checkpoint_interval and log_retention: %+v, %v; want %+v", got, err, want)
	}
	// Defaults applied twice (the command line's config, then New) still
	// leave the values defaulted.
	got, err = resolve(testConfig("c").Defaults().Defaults())
	if err != nil || got.checkpointInterval != 2 {
		t.Errorf("after Defaults twice: %+v, %v; want the table's interval 2", got, err)
	}

	e2 := newEnv(t)
	bad := e2.createRecords(map[string]string{delta.PropCheckpointInterval: "often", delta.PropLogRetention: "interval 1 month"})
	if _, err := bad.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, err := New(testConfig("c"), Deps{JS: e2.js, Store: e2.local})
	if err != nil {
		t.Fatal(err)
	}
	got, err = c.lifecycle(bad)
	if want := (lifecycle{100, DefaultLogRetention, lake.DefaultGrace}); err == nil || got != want {
		t.Errorf("unreadable properties: %+v, %v; want the defaults %+v and an error", got, err, want)
	}
}

// TestNewTablesCarryLifecycle: the tables a committer creates carry the
// lifecycle it uses in their metaData.configuration, so Spark and delta-rs
// checkpoint and clean up alike.
func TestNewTablesCarryLifecycle(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig("c1")
	cfg.CheckpointInterval = 3
	r := e.start(cfg, nil)
	e.publish(e.encode("a.1", batch{1, 0}))
	e.waitHW(r.c, 1)
	want := map[string]string{delta.PropCheckpointInterval: "3", delta.PropLogRetention: "interval 30 days",
		delta.PropDeletedFileRetention: "interval 7 days"}
	for _, table := range []string{lake.RecordsTable, lake.TemplatesTable, lake.ProgressTable} {
		snap, err := delta.OpenTable(e.local, table).Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := snap.Metadata.Configuration; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s configuration %v, want %v", table, got, want)
		}
	}
}

// TestTableCheckpointIntervalUsed: a records table created elsewhere with
// delta.checkpointInterval 2 is checkpointed every 2 versions by a
// committer whose configuration leaves the interval unset (default 100).
func TestTableCheckpointIntervalUsed(t *testing.T) {
	e := newEnv(t)
	e.createRecords(map[string]string{delta.PropCheckpointInterval: "2"})
	r := e.start(testConfig("c1"), nil)
	for s := uint64(1); s <= 4; s++ {
		e.publish(e.encode(fmt.Sprintf("a.%d", s), batch{s, s - 1}))
		e.waitHW(r.c, s)
	}
	eventually(t, 15*time.Second, "records checkpoint at 4", func() bool { return e.lastCheckpointVersion(lake.RecordsTable) >= 4 })
	e.exactlyOnce(1, 2, 3, 4)
}
