package lake

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/quarrylake/quarry/internal/delta"
)

// schemaColumns is the top-level column names of a Delta schemaString,
// without the partition columns (those live in the log, not the files).
func schemaColumns(md delta.Metadata) ([]string, error) {
	var s struct {
		Type   string `json:"type"`
		Fields []struct {
			Name string `json:"name"`
		} `json:"fields"`
	}
	if err := json.Unmarshal([]byte(md.SchemaString), &s); err != nil {
		return nil, fmt.Errorf("schemaString: %w", err)
	}
	if s.Type != "struct" {
		return nil, fmt.Errorf("schemaString: type %q, want struct", s.Type)
	}
	var out []string
	for _, f := range s.Fields {
		if !slices.Contains(md.PartitionColumns, f.Name) {
			out = append(out, f.Name)
		}
	}
	return out, nil
}
