// Command loghub-eval scores the template miner (internal/mining) on the
// Loghub-2k datasets with one generic configuration and prints GA, PA, FGA
// and FTA per dataset beside Drain's published grouping accuracy.
//
//	go run ./cmd/loghub-eval [-dir DIR] [-write docs/accuracy.md] [-v] [-summary]
//
// With -summary it prints only one line of averages for scripts
// (scripts/bench.sh): "ga=… pa=… loo_ga=… loo_pa=… raw_ga=…".
//
// The data are read from -dir (default $LOGHUB_DIR, else
// /work/shared/loghub2k); they are never copied into the repository. The
// command exits 1 when a dataset's GA falls below Drain's published figure
// or the average GA/PA miss their floors (0.95/0.80), and 2 on errors
// (including missing data).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/quarrylake/quarry/internal/mining"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loghub-eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", DefaultDir(), "Loghub-2k directory (default $LOGHUB_DIR or /work/shared/loghub2k)")
	write := fs.String("write", "", "also write the Markdown report to this file (e.g. docs/accuracy.md)")
	verbose := fs.Bool("v", false, "list the ground-truth templates that were not parsed exactly")
	only := fs.String("datasets", "", "comma-separated subset of datasets (default all)")
	summary := fs.Bool("summary", false, "print only one line of averages (ga, pa, loo_ga, loo_pa, raw_ga) instead of the tables")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	names := Datasets
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	cfg := mining.DefaultConfig()
	var rows []Scores
	var ds []*Dataset
	var raws []RawRow
	for _, name := range names {
		d, err := Load(*dir, name)
		if err != nil {
			fmt.Fprintf(stderr, "loghub-eval: %v\n", err)
			return 2
		}
		ds = append(ds, d)
		p, err := Mine(cfg, d)
		if err != nil {
			fmt.Fprintf(stderr, "loghub-eval: %v\n", err)
			return 2
		}
		s := Score(d, p)
		rows = append(rows, s)
		if *verbose {
			explain(stdout, d, p)
		}
		rd, err := LoadRaw(*dir, d)
		if err != nil {
			fmt.Fprintf(stderr, "loghub-eval: %v\n", err)
			return 2
		}
		rp, err := Mine(cfg, rd)
		if err != nil {
			fmt.Fprintf(stderr, "loghub-eval: %v\n", err)
			return 2
		}
		rs := Score(rd, rp)
		if *verbose {
			explain(stdout, rd, rp)
		}
		raws = append(raws, RawRow{Dataset: name, ContentGA: s.GA, RawGA: rs.GA, ContentFGA: s.FGA, RawFGA: rs.FGA})
	}
	report, failures := Report(rows, len(names) == len(Datasets))
	out := stdout
	if *summary {
		out = io.Discard
	}
	fmt.Fprint(out, report)
	loo, err := LeaveOneOut(ds, Grid(cfg))
	if err != nil {
		fmt.Fprintf(stderr, "loghub-eval: %v\n", err)
		return 2
	}
	looTable, lga, lpa := LOOReport(rows, loo)
	fmt.Fprintf(out, "\nLeave-one-dataset-out (knobs chosen on the other sets):\n\n%s", looTable)
	if len(names) == len(Datasets) {
		if lga+1e-9 < MinLOOGA {
			failures = append(failures, fmt.Sprintf("held-one-out average GA %.3f < %.2f", lga, MinLOOGA))
		}
		if lpa+1e-9 < MinLOOPA {
			failures = append(failures, fmt.Sprintf("held-one-out average PA %.3f < %.2f", lpa, MinLOOPA))
		}
	}
	rawTable, rawFails := RawReport(raws, MaxHeaderCost)
	failures = append(failures, rawFails...)
	fmt.Fprintf(out, "\nRaw lines with their headers (grouping only):\n\n%s", rawTable)
	if *summary {
		fmt.Fprintln(stdout, Summary(rows, lga, lpa, raws))
	}
	if *write != "" {
		sens, err := Sensitivity(*dir, names, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "loghub-eval: %v\n", err)
			return 2
		}
		doc := Document(report, looTable, rawTable, sens, cfg)
		if err := os.WriteFile(*write, []byte(doc), 0o644); err != nil {
			fmt.Fprintf(stderr, "loghub-eval: %v\n", err)
			return 2
		}
	}
	if len(failures) > 0 {
		for _, f := range failures {
			fmt.Fprintf(stderr, "loghub-eval: below floor: %s\n", f)
		}
		return 1
	}
	return 0
}

// explain prints, per ground-truth template that is not both grouped and
// parsed exactly, the predicted templates of its lines.
func explain(w io.Writer, d *Dataset, p *Prediction) {
	byTruth := map[string]map[uint64]int{}
	truthCount := map[uint64]map[string]int{}
	for i, t := range d.Templates {
		id := p.IDs[i]
		if byTruth[t] == nil {
			byTruth[t] = map[uint64]int{}
		}
		byTruth[t][id]++
		if truthCount[id] == nil {
			truthCount[id] = map[string]int{}
		}
		truthCount[id][t]++
	}
	truths := make([]string, 0, len(byTruth))
	for t := range byTruth {
		truths = append(truths, t)
	}
	sort.Strings(truths)
	for _, t := range truths {
		ids := byTruth[t]
		ok := len(ids) == 1
		for id := range ids {
			if len(truthCount[id]) != 1 || Normalize(p.Texts[id]) != t {
				ok = false
			}
		}
		if ok {
			continue
		}
		fmt.Fprintf(w, "%s TRUTH %q\n", d.Name, t)
		for id, n := range ids {
			fmt.Fprintf(w, "    %4d x id %d (%d truths) %q\n", n, id, len(truthCount[id]), Normalize(p.Texts[id]))
		}
	}
}
