package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"
)

func init() {
	register(&command{name: "status", summary: "print the lake's high-water, table versions, checkpoints and per-source completeness", run: runStatus})
}

// runStatus prints what the lake alone says about its completeness: the
// high-water, each table's newest version and checkpoint, and per source the
// finalized_until the progress table records.
func runStatus(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	lk, err := openLake(ctx, fs, e, &c)
	if err != nil {
		return err
	}
	st, err := lk.Status(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "high-water\t%d\n\n", st.HighWater)
	fmt.Fprintln(tw, "TABLE\tVERSION\tCHECKPOINT")
	for _, t := range st.Tables {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Table, orNone(t.Version), orNone(t.Checkpoint))
	}
	fmt.Fprintln(tw)
	if len(st.Progress) == 0 {
		fmt.Fprintln(tw, "no source progress recorded yet")
		return tw.Flush()
	}
	fmt.Fprintln(tw, "SOURCE\tTENANT\tFINALIZED_UNTIL\tWAL_SEQ\tHIGH_WATER\tVERSION")
	for _, p := range st.Progress {
		tenant := p.Tenant
		if tenant == "" {
			tenant = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\n", p.Source, tenant, p.FinalizedUntil.Format(time.RFC3339Nano), p.WALSeq, p.HighWater, p.Version)
	}
	return tw.Flush()
}

func orNone(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}
