package delta

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Table properties (metaData.configuration) this package and quarry's
// committer and vacuum read, as PROTOCOL.md and Delta's table properties
// name them. Spark and delta-rs read the same keys, so a table carrying
// them is checkpointed, cleaned up and vacuumed alike by every writer.
const (
	// PropCheckpointInterval is how many versions lie between two
	// checkpoints, a positive integer ("100").
	PropCheckpointInterval = "delta.checkpointInterval"
	// PropLogRetention is how long log entries are kept before the
	// cleanup after a checkpoint may delete them ("interval 30 days").
	PropLogRetention = "delta.logRetentionDuration"
	// PropDeletedFileRetention is how long a removed file's tombstone is
	// kept and the file protected from vacuum ("interval 7 days").
	PropDeletedFileRetention = "delta.deletedFileRetentionDuration"
)

// Properties are the lifecycle properties of a table's configuration;
// a zero field is one the table does not set.
type Properties struct {
	CheckpointInterval   int
	LogRetention         time.Duration
	DeletedFileRetention time.Duration
}

// ReadProperties reads the lifecycle properties of a table's
// configuration. A key that is absent is left zero; a value that does not
// parse (or is not positive) is left zero too and reported in the error,
// so the caller can log it and use its own value.
func ReadProperties(conf map[string]string) (Properties, error) {
	var p Properties
	var errs []error
	if s, ok := conf[PropCheckpointInterval]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%s %q: want a positive integer", PropCheckpointInterval, s))
		} else {
			p.CheckpointInterval = n
		}
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{{PropLogRetention, &p.LogRetention}, {PropDeletedFileRetention, &p.DeletedFileRetention}} {
		s, ok := conf[d.key]
		if !ok {
			continue
		}
		v, err := ParseInterval(s)
		if err == nil && v <= 0 {
			err = errors.New("not positive")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", d.key, s, err))
			continue
		}
		*d.dst = v
	}
	return p, errors.Join(errs...)
}

// Set writes p's non-zero fields into conf, in the forms Spark and delta-rs
// parse ("100", "interval 30 days").
func (p Properties) Set(conf map[string]string) {
	if p.CheckpointInterval > 0 {
		conf[PropCheckpointInterval] = strconv.Itoa(p.CheckpointInterval)
	}
	if p.LogRetention > 0 {
		conf[PropLogRetention] = FormatInterval(p.LogRetention)
	}
	if p.DeletedFileRetention > 0 {
		conf[PropDeletedFileRetention] = FormatInterval(p.DeletedFileRetention)
	}
}

// intervalUnits are the units of a Delta interval string with fixed
// lengths: months and years are calendar units with no fixed duration and
// are not accepted.
var intervalUnits = map[string]time.Duration{
	"nanosecond": time.Nanosecond, "microsecond": time.Microsecond, "millisecond": time.Millisecond,
	"second": time.Second, "minute": time.Minute, "hour": time.Hour,
	"day": 24 * time.Hour, "week": 7 * 24 * time.Hour,
}

// ParseInterval parses a Delta interval table property: "interval" followed
// by one or more "<integer> <unit>" pairs, units nanosecond to week,
// singular or plural, any case ("interval 30 days", "interval 1 week
// 12 hours"). The "interval" word may be left out.
func ParseInterval(s string) (time.Duration, error) {
	f := strings.Fields(strings.ToLower(s))
	if len(f) > 0 && f[0] == "interval" {
		f = f[1:]
	}
	if len(f) == 0 || len(f)%2 != 0 {
		return 0, errors.New(`want "interval <number> <unit>"`)
	}
	var d time.Duration
	for i := 0; i < len(f); i += 2 {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("number %q: want an integer", f[i])
		}
		unit, ok := intervalUnits[strings.TrimSuffix(f[i+1], "s")]
		if !ok {
			return 0, fmt.Errorf("unit %q: want nanosecond, microsecond, millisecond, second, minute, hour, day or week", f[i+1])
		}
		if n > int64(1<<62)/int64(unit) || n < -int64(1<<62)/int64(unit) {
			return 0, errors.New("out of range")
		}
		// Each pair is within ±2^62, so the sum so far plus this one
		// stays in int64 while the sum so far does: check it after.
		d += time.Duration(n) * unit
		if d > 1<<62 || d < -1<<62 {
			return 0, errors.New("out of range")
		}
	}
	return d, nil
}

// FormatInterval writes d as a Delta interval in the largest unit that
// divides it ("interval 30 days", "interval 90 minutes").
func FormatInterval(d time.Duration) string {
	for _, u := range []struct {
		name string
		d    time.Duration
	}{{"days", 24 * time.Hour}, {"hours", time.Hour}, {"minutes", time.Minute}, {"seconds", time.Second}, {"milliseconds", time.Millisecond}} {
		if d%u.d == 0 {
			return fmt.Sprintf("interval %d %s", d/u.d, u.name)
		}
	}
	return fmt.Sprintf("interval %d nanoseconds", d)
}

// Properties are the lifecycle properties of the table's metadata, as the
// table's cached state last read it (no I/O, and no wait for a Snapshot or
// checkpoint in progress; zero before the first Snapshot). Unreadable
// values are left zero and reported in the error.
func (t *Table) Properties() (Properties, error) {
	md := t.meta.Load()
	if md == nil {
		return Properties{}, nil
	}
	return ReadProperties(md.Configuration)
}
