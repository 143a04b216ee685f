// Package laketest checks a lake the way quarry's promise is stated: every
// input line exactly once in the records table, read back byte for byte,
// and both Delta logs valid. It serves the in-process, multi-process and
// container test suites alike.
package laketest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
)

// Lines is every committed record of store as its original line (what
// `quarry query --format raw` prints), sorted.
func Lines(ctx context.Context, store objstore.Store) ([]string, error) {
	var out []string
	var b bytes.Buffer
	err := lake.Open(store).Query(ctx, lake.Filter{}, func(r lake.Record) error {
		b.Reset()
		if err := lake.WriteRaw(&b, r); err != nil {
			return err
		}
		out = append(out, strings.TrimSuffix(b.String(), "\n"))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("query the lake: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

// Diff describes how the multisets got and want differ, "" when they are
// equal. Neither slice is modified.
func Diff(got, want []string) string {
	got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	var extra, missing []string
	i, j := 0, 0
	for i < len(got) || j < len(want) {
		switch {
		case j == len(want) || i < len(got) && got[i] < want[j]:
			extra = append(extra, got[i])
			i++
		case i == len(got) || want[j] < got[i]:
			missing = append(missing, want[j])
			j++
		default:
			i++
			j++
		}
	}
	if len(extra) == 0 && len(missing) == 0 {
		return ""
	}
	short := func(s []string) []string { return s[:min(len(s), 3)] }
	return fmt.Sprintf("%d lines, want %d: %d duplicate or unknown (e.g. %q), %d missing (e.g. %q)",
		len(got), len(want), len(extra), short(extra), len(missing), short(missing))
}

// ValidLogs checks both Delta logs of store with delta.ValidateLog.
func ValidLogs(ctx context.Context, store objstore.Store) error {
	for _, table := range []string{lake.RecordsTable, lake.TemplatesTable} {
		if err := delta.ValidateLog(ctx, store, table); err != nil {
			return fmt.Errorf("delta log %s: %w", table, err)
		}
	}
	return nil
}

// ExactlyOnce fails t unless store's committed records are exactly the
// multiset want and both Delta logs are valid.
func ExactlyOnce(t testing.TB, store objstore.Store, want []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	got, err := Lines(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(got, want); d != "" {
		t.Fatalf("lake is not exactly the input: %s", d)
	}
	if err := ValidLogs(ctx, store); err != nil {
		t.Fatal(err)
	}
}
