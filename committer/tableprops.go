package committer

import (
	"time"

	"github.com/quarrylake/quarry/internal/delta"
)

// lifecycleSet names the Config fields that have a Delta table property
// counterpart: delta.checkpointInterval, delta.logRetentionDuration,
// delta.deletedFileRetentionDuration.
type lifecycleSet struct{ checkpointInterval, logRetention, tombstoneRetention bool }

// lifecycle is what the committer uses for one table.
type lifecycle struct {
	checkpointInterval int
	logRetention       time.Duration
	tombstoneRetention time.Duration
}

// lifecycle resolves t's checkpoint interval, log retention and tombstone
// retention. The rule, per value: set in the committer's configuration, it
// wins; left unset, the table's property (metaData.configuration, as the
// table was last read) wins when present and readable, so Spark, delta-rs
// and quarry keep the same lifecycle; else the configuration's default. New
// tables are created carrying the configuration's values (newTableConfig).
// A property that does not parse is ignored and returned as the error.
func (c *Committer) lifecycle(t *delta.Table) (lifecycle, error) {
	lc := lifecycle{
		checkpointInterval: c.cfg.CheckpointInterval,
		logRetention:       c.cfg.LogRetention,
		tombstoneRetention: c.cfg.TombstoneRetention,
	}
	props, err := t.Properties()
	d := c.cfg.defaulted
	if d.checkpointInterval && props.CheckpointInterval > 0 {
		lc.checkpointInterval = props.CheckpointInterval
	}
	if d.logRetention && props.LogRetention > 0 {
		lc.logRetention = props.LogRetention
	}
	if d.tombstoneRetention && props.DeletedFileRetention > 0 {
		lc.tombstoneRetention = props.DeletedFileRetention
	}
	return lc, err
}

// newTableConfig is the metaData.configuration of a table the committer
// creates: the lifecycle it will use, so other Delta writers checkpoint,
// clean up the log and vacuum the same way.
func (c *Committer) newTableConfig() map[string]string {
	conf := map[string]string{}
	delta.Properties{
		CheckpointInterval:   c.cfg.CheckpointInterval,
		LogRetention:         c.cfg.LogRetention,
		DeletedFileRetention: c.cfg.TombstoneRetention,
	}.Set(conf)
	return conf
}
