package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
)

func init() {
	register(&command{name: "query", summary: "print committed records from the lake", run: runQuery})
	register(&command{name: "templates", summary: "list committed templates with their versions and record counts", run: runTemplates})
	register(&command{name: "vacuum", summary: "delete data files no Delta version references, older than a retention", run: runVacuum})
}

// openLake resolves --lake (flag, env QUARRY_LAKE, config lake.url).
func openLake(ctx context.Context, fs *flag.FlagSet, e *env, c *common) (*lake.Lake, error) {
	if _, err := c.resolve(fs, e); err != nil {
		return nil, err
	}
	if c.lake == "" {
		return nil, errUsage{"--lake is required (or QUARRY_LAKE)"}
	}
	store, err := objstore.Open(ctx, c.lake, s3Options(e))
	if err != nil {
		return nil, fmt.Errorf("open lake: %w", err)
	}
	return lake.Open(store), nil
}

func parseTime(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, errUsage{fmt.Sprintf("--%s %q: want RFC 3339, YYYY-MM-DD or a duration ago like 15m", name, s)}
}

func runQuery(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	tenant := fs.String("tenant", "", "only this tenant")
	tid := fs.Uint64("template-id", 0, "only this template id")
	since := fs.String("since", "", "records at or after this time (RFC 3339, YYYY-MM-DD, or a duration ago like 1h)")
	until := fs.String("until", "", "records before this time")
	format := fs.String("format", "table", "raw (each original line exactly), jsonl or table")
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	s, err := parseTime("since", *since)
	if err != nil {
		return err
	}
	u, err := parseTime("until", *until)
	if err != nil {
		return err
	}
	out, err := lake.NewFormatter(e.stdout, *format)
	if err != nil {
		return errUsage{err.Error()}
	}
	lk, err := openLake(ctx, fs, e, &c)
	if err != nil {
		return err
	}
	if err := lk.Query(ctx, lake.Filter{Tenant: *tenant, TemplateID: *tid, Since: s, Until: u}, out.Write); err != nil {
		return err
	}
	return out.Flush()
}

func runTemplates(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("templates", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	tenant := fs.String("tenant", "", "only this tenant")
	format := fs.String("format", "table", "table or jsonl")
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	lk, err := openLake(ctx, fs, e, &c)
	if err != nil {
		return err
	}
	infos, err := lk.Templates(ctx, *tenant)
	if err != nil {
		return err
	}
	return lake.WriteTemplates(e.stdout, *format, infos)
}

func runVacuum(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("vacuum", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	retention := fs.Duration("retention", 7*24*time.Hour, "only delete unreferenced files older than this")
	dry := fs.Bool("dry-run", false, "list what would be deleted")
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	lk, err := openLake(ctx, fs, e, &c)
	if err != nil {
		return err
	}
	deleted, err := lk.Vacuum(ctx, *retention, *dry)
	for _, k := range deleted {
		fmt.Fprintln(e.stdout, k)
	}
	return err
}
