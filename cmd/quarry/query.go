package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	iofs "io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
)

func init() {
	register(&command{name: "query", summary: "print committed records from the lake", run: runQuery})
	register(&command{name: "templates", summary: "list committed templates with their versions and record counts", run: runTemplates})
	register(&command{name: "vacuum", summary: "delete data files no Delta version references, older than a retention", run: runVacuum})
}

// openLake resolves --lake (flag, env QUARRY_LAKE, config lake.url) and
// opens it for reading. A URL with no Delta table is a usage error (exit
// 2), so that a typo does not read as an empty lake; a local path that does
// not exist is not created.
func openLake(ctx context.Context, fs *flag.FlagSet, e *env, c *common) (*lake.Lake, error) {
	if _, err := c.resolve(fs, e); err != nil {
		return nil, err
	}
	if c.lake == "" {
		return nil, errUsage{"--lake is required (or QUARRY_LAKE)"}
	}
	if dir, ok := localLakeDir(c.lake); ok {
		if _, err := os.Stat(dir); errors.Is(err, iofs.ErrNotExist) {
			return nil, errUsage{fmt.Sprintf("lake %s: %v: no such directory", c.lake, lake.ErrNoTable)}
		}
	}
	store, err := objstore.Open(ctx, c.lake, s3Options(e))
	if err != nil {
		return nil, fmt.Errorf("open lake: %w", err)
	}
	lk := lake.Open(store)
	if err := lk.Exists(ctx); errors.Is(err, lake.ErrNoTable) {
		return nil, errUsage{fmt.Sprintf("lake %s: %v", c.lake, err)}
	} else if err != nil {
		return nil, fmt.Errorf("open lake %s: %w", c.lake, err)
	}
	return lk, nil
}

// localLakeDir is the directory of a local lake URL (file:///abs or a
// plain path).
func localLakeDir(lakeURL string) (string, bool) {
	switch {
	case strings.HasPrefix(lakeURL, "file://"):
		u, err := url.Parse(lakeURL)
		if err != nil {
			return "", false
		}
		return u.Path, true
	case strings.Contains(lakeURL, "://"):
		return "", false
	default:
		return lakeURL, true
	}
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
	grace := fs.Duration("grace", lake.DefaultGrace, "only delete removed files (compaction, retention) whose remove is older than this")
	dry := fs.Bool("dry-run", false, "list what would be deleted")
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	lk, err := openLake(ctx, fs, e, &c)
	if err != nil {
		return err
	}
	deleted, err := lk.Vacuum(ctx, lake.VacuumOptions{Retention: *retention, Grace: *grace, DryRun: *dry})
	for _, k := range deleted {
		fmt.Fprintln(e.stdout, k)
	}
	return err
}
