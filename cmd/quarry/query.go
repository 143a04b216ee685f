package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	iofs "io/fs"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/quarrylake/quarry/internal/earlyheap"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/query"
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
	tid := fs.Uint64("template-id", 0, "only this template id (and the templates merged into it)")
	since := fs.String("since", "", "records at or after this time (RFC 3339, YYYY-MM-DD, or a duration ago like 1h)")
	until := fs.String("until", "", "records before this time")
	format := fs.String("format", "table", "raw (each original line exactly; counts as VALUE<TAB>COUNT), jsonl or table")
	limit := fs.Int("limit", 0, "print at most this many records (0: all)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: quarry query --lake URL [flags] ['QUERY']  (docs/query.md; no query prints every record)")
		fs.PrintDefaults()
	}
	rest, err := parseFlags(fs, e, queryFirst(fs, args))
	if err != nil {
		return err
	}
	// The query is the one positional argument; flags may follow it.
	var src []string
	for len(rest) > 0 {
		src = append(src, rest[0])
		if rest, err = parseFlags(fs, e, rest[1:]); err != nil {
			return err
		}
	}
	if len(src) > 1 {
		return errUsage{fmt.Sprintf("one query argument, got %d (quote the query: 'error | count by template')", len(src))}
	}
	s, err := parseTime("since", *since)
	if err != nil {
		return err
	}
	u, err := parseTime("until", *until)
	if err != nil {
		return err
	}
	if *limit < 0 {
		return errUsage{fmt.Sprintf("--limit %d: want 0 or more", *limit)}
	}
	qsrc := ""
	if len(src) == 1 {
		qsrc = src[0]
	}
	q, err := query.Compile(qsrc)
	if err != nil {
		var pe *query.ParseError
		if errors.As(err, &pe) {
			return errUsage{pe.Error() + "\n" + pe.Caret()}
		}
		return errUsage{err.Error()}
	}
	if !slices.Contains(lake.Formats, *format) {
		return errUsage{fmt.Sprintf("output format %q: want one of %s", *format, strings.Join(lake.Formats, ", "))}
	}
	lk, err := openLake(ctx, fs, e, &c)
	if err != nil {
		return err
	}
	defer batchGC(e.getenv)()
	if !q.Aggregates() {
		// A search decodes columns into tens of MB; an aggregate mostly
		// reads footers, and the collection hugeHeap costs would outweigh
		// its faults: the heap mapping it is about to fill is advised
		// instead.
		hugeHeap()
	} else {
		earlyheap.Advise()
	}
	opts := lake.SearchOptions{Tenant: *tenant, TemplateID: *tid, Since: s, Until: u, Limit: *limit, LineOnly: *format == "raw"}
	if !q.Aggregates() && *format == "raw" {
		// Lines rendered straight into SearchRaw's buffer, written in
		// chunks of their own: no record per line, no second buffer.
		return lk.SearchRaw(ctx, q, opts, e.stdout)
	}
	bw := bufio.NewWriterSize(e.stdout, 1<<20)
	if q.Aggregates() {
		rows, err := lk.Aggregate(ctx, q, opts)
		if err != nil {
			return err
		}
		if *limit > 0 && len(rows) > *limit {
			rows = rows[:*limit]
		}
		if err := lake.WriteRows(bw, *format, q.NewAggregator().Header(), rows); err != nil {
			return err
		}
		return bw.Flush()
	}
	out, err := lake.NewFormatter(bw, *format)
	if err != nil {
		return errUsage{err.Error()}
	}
	if err := lk.Search(ctx, q, opts, out.Write); err != nil {
		return err
	}
	if err := out.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// batchHeapLimit is the heap a query grows to before its first collection.
const batchHeapLimit = 512 << 20

// batchGC sets the collector for a query, a short batch job that allocates
// as it decodes: no collection until the heap reaches batchHeapLimit, then
// the collector keeps it there (GOGC=off with a GOMEMLIMIT). A query of a
// few files then ends before its first collection, which cost about a
// fifth of a selective term's CPU (docs/benchmarks.md). GOGC or GOMEMLIMIT
// in the environment win. It returns a func that restores the settings.
func batchGC(getenv func(string) string) (restore func()) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	pct := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(batchHeapLimit)
	return func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(limit)
	}
}

// queryFirst moves a query argument that starts with '-' ('-GET error',
// '-attrs.zone:*') behind "--", so the flag package does not take it for a
// flag: an argument that starts with one '-' is a query when it is not a
// defined flag and not the value of the flag before it. An unknown "--x"
// stays a flag error.
func queryFirst(fs *flag.FlagSet, args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return args
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if f == nil && (name == "h" || name == "help") {
			return args // the flag package's help, as every command's -h
		}
		if f == nil && a[1] != '-' {
			out := append(slices.Clone(args[:i]), args[i+1:]...)
			return append(append(out, "--"), a)
		}
		if f == nil {
			return args
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); !hasValue && !(ok && bf.IsBoolFlag()) {
			i++ // the flag's value
		}
	}
	return args
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
	grace := fs.Duration("grace", 0, "only delete removed files (compaction, retention) whose remove is older than this (0: each table's delta.deletedFileRetentionDuration, else 168h)")
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
