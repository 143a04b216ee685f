package committer

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
)

// Retention says how long each tenant's records are kept. The records of
// a UTC day D of a tenant whose retention is R are removed once D is on or
// before the UTC date of (start of today - R): "30d" keeps today and the 29
// dates before it. A file all of whose days are past it is removed (a
// remove action with dataChange=true, the data is gone); a file with days
// on both sides of the cut (a table partitioned by tenant only: lake.Layout)
// is removed the same way and its kept rows rewritten into a new file in
// the same commit (an add with dataChange=false: those rows are not new). The files stay in the store until `quarry vacuum` deletes them
// after its grace period, so time travel and running readers keep working.
type Retention struct {
	// Default applies to tenants not in Tenants; 0 (unset, or "none")
	// keeps records for ever.
	Default Age `yaml:"default"`
	// Tenants overrides Default per tenant; "none" keeps that tenant's
	// records for ever.
	Tenants map[string]Age `yaml:"tenants"`
}

// Age is a duration that also reads as whole days ("30d") and "none" (0).
type Age time.Duration

// maxAgeDays is the most days an Age holds (about 292 years).
const maxAgeDays = int(math.MaxInt64 / int64(24*time.Hour))

// ParseAge reads whole days ("30d"), a Go duration ("36h") or "none" / "" (0).
func ParseAge(s string) (Age, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "" || s == "none" || s == "0":
		return 0, nil
	case strings.HasSuffix(s, "d"):
		n, err := strconv.Atoi(strings.TrimSuffix(s, "d"))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("age %q: want <days>d, a Go duration or none", s)
		}
		if n > maxAgeDays {
			// More days than a time.Duration holds: the product would
			// wrap around, to a negative age or to a short one.
			return 0, fmt.Errorf("age %q: at most %dd; none keeps records for ever", s, maxAgeDays)
		}
		return Age(time.Duration(n) * 24 * time.Hour), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("age %q: want <days>d, a Go duration or none", s)
	}
	return Age(d), nil
}

// UnmarshalYAML reads an Age from a scalar.
func (a *Age) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := ParseAge(s)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// MarshalYAML writes an Age as whole days when it is, else as a duration.
func (a Age) MarshalYAML() (any, error) { return a.String(), nil }

func (a Age) String() string {
	d := time.Duration(a)
	switch {
	case d == 0:
		return "none"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// Validate reports every problem with r: a retention below one day would
// remove today's partition.
func (r Retention) Validate() error {
	var errs []error
	check := func(key string, a Age) {
		if a != 0 && time.Duration(a) < 24*time.Hour {
			errs = append(errs, fmt.Errorf("committer.retention.%s %s: must be none or at least 1d", key, a))
		}
	}
	check("default", r.Default)
	for t, a := range r.Tenants {
		if t == "" {
			errs = append(errs, errors.New("committer.retention.tenants: empty tenant name"))
		}
		check("tenants."+t, a)
	}
	return errors.Join(errs...)
}

// Enabled reports whether any tenant has a retention.
func (r Retention) Enabled() bool {
	if r.Default != 0 {
		return true
	}
	for _, a := range r.Tenants {
		if a != 0 {
			return true
		}
	}
	return false
}

// of is tenant's retention, 0 for ever.
func (r Retention) of(tenant string) time.Duration {
	if a, ok := r.Tenants[tenant]; ok {
		return time.Duration(a)
	}
	return time.Duration(r.Default)
}

// expiredThrough is the last UTC day (yyyy-mm-dd) whose records of tenant
// are past its retention at now; ok is false when it keeps them for ever.
func (r Retention) expiredThrough(tenant string, now time.Time) (day string, ok bool) {
	ret := r.of(tenant)
	if ret <= 0 {
		return "", false
	}
	today := now.UTC().Truncate(24 * time.Hour)
	return today.Add(-ret).Truncate(24 * time.Hour).Format(time.DateOnly), true
}

// retentionPlan is what retention does at now, each list sorted by path:
// the remove actions (dataChange=true) of every live records file whose
// rows' days (lake.FileDays: its date partition, or its ts stats) are all
// past its tenant's retention, and the files that straddle the cut (some
// days past it, some not; only in a table partitioned by tenant), whose
// kept rows are rewritten. A file with WAL sequences above the high-water
// hw waits for a later pass: its report may still own batches the barrier
// has not passed. A file whose days are not known is kept.
func retentionPlan(snap *delta.Snapshot, r Retention, hw int64, now time.Time) (removes []delta.Action, straddle []delta.Add) {
	ms := now.UnixMilli()
	for _, f := range snap.Files {
		cut, ok := r.expiredThrough(f.PartitionValues["tenant"], now)
		if !ok {
			continue
		}
		first, last, ok := lake.FileDays(f.PartitionValues, f.Stats)
		if !ok || first > cut {
			continue
		}
		if _, hi, ok := walRange(f); ok && hi > hw {
			continue
		}
		if last > cut {
			straddle = append(straddle, f)
			continue
		}
		removes = append(removes, retentionRemove(f, ms))
	}
	sort.Slice(removes, func(i, j int) bool { return removes[i].Remove.Path < removes[j].Remove.Path })
	sort.Slice(straddle, func(i, j int) bool { return straddle[i].Path < straddle[j].Path })
	return removes, straddle
}

// retentionRemove is the remove of f by retention: its rows are gone
// (dataChange=true).
func retentionRemove(f delta.Add, ms int64) delta.Action {
	return delta.Action{Remove: &delta.Remove{
		Path: f.Path, DeletionTimestamp: ms, DataChange: true, ExtendedFileMetadata: true,
		PartitionValues: f.PartitionValues, Size: f.Size, Tags: f.Tags,
	}}
}
