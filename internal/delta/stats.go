package delta

import (
	"encoding/json"
	"fmt"
	"time"
)

// Stats is the per-file statistics struct of an add action.
type Stats struct {
	NumRecords int64            `json:"numRecords"`
	MinValues  map[string]any   `json:"minValues,omitempty"`
	MaxValues  map[string]any   `json:"maxValues,omitempty"`
	NullCount  map[string]int64 `json:"nullCount,omitempty"`
}

// StatsJSON renders an add action's stats string. min and max map column
// names to values (numbers, strings, bools, time.Time; nested maps for
// struct columns); time.Time values become UTC ISO 8601 strings truncated to
// milliseconds, as the protocol asks. Empty maps are left out.
func StatsJSON(numRecords int64, min, max map[string]any, nullCount map[string]int64) string {
	s := Stats{NumRecords: numRecords, MinValues: statValues(min), MaxValues: statValues(max)}
	if len(nullCount) > 0 {
		s.NullCount = nullCount
	}
	b, err := json.Marshal(s)
	if err != nil {
		// Only unsupported value types (channels, funcs) get here; keep the
		// count, which readers need, rather than fail the commit.
		b, _ = json.Marshal(Stats{NumRecords: numRecords})
	}
	return string(b)
}

func statValues(m map[string]any) map[string]any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case time.Time:
			out[k] = x.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z")
		case map[string]any:
			out[k] = statValues(x)
		default:
			out[k] = v
		}
	}
	return out
}

// ParseStats decodes an add action's stats string.
func ParseStats(s string) (Stats, error) {
	var st Stats
	if s == "" {
		return st, fmt.Errorf("no stats")
	}
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}
