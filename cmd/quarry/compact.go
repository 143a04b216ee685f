package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/quarrylake/quarry/committer"
	"github.com/quarrylake/quarry/internal/natsutil"
)

func init() {
	register(&command{name: "compact", summary: "rewrite the small files of closed partitions once, under the committer lease", run: runCompact})
}

// runCompact: quarry compact --lake URL --nats URL [--tenant T] [--date D] [--retention]
//
// It takes the committer lease like a standby taking over, and refuses
// (exit 1) while a committer holds it: a running committer compacts in the
// background itself. The settings are committer.compaction and
// committer.retention of --config.
func runCompact(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("compact", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	tenant := fs.String("tenant", "", "only this tenant's partitions")
	date := fs.String("date", "", "only the partitions of this date (YYYY-MM-DD; tables partitioned by tenant and date, made before issue 10)")
	retention := fs.Bool("retention", false, "also remove the records past committer.retention (files cut at the retention are rewritten with their kept rows)")
	target := fs.Int64("target-bytes", 0, "size the rewritten files aim at (default committer.compaction.target_bytes, 128 MiB)")
	if _, err := parseFlags(fs, e, args); err != nil {
		return err
	}
	if *date != "" {
		if _, err := time.Parse(time.DateOnly, *date); err != nil {
			return errUsage{fmt.Sprintf("--date %q: want YYYY-MM-DD", *date)}
		}
	}
	cc, err := c.resolve(fs, e)
	if err != nil {
		return err
	}
	if cc.URL == "" {
		return errUsage{"--nats is required (or QUARRY_NATS_URL, or nats.url in the config)"}
	}
	root := c.cfg
	if *target > 0 {
		root.Committer.Compaction.TargetBytes = *target
	}
	root, err = checked(root)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, e, &c)
	if err != nil {
		return err
	}
	log, err := c.logger(e.stderr)
	if err != nil {
		return err
	}
	cc.Name = "quarry-compact"
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	nc, js, err := natsutil.Connect(cctx, cc, c.warnLogger(e.stderr))
	cancel()
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg := root.Committer
	cfg.Name = "" // a name of its own in the lease: never mistaken for a committer's earlier term
	res, err := committer.Compact(ctx, cfg, committer.Deps{JS: js, Store: store, Log: log},
		committer.CompactOptions{Only: committer.Partition{Tenant: *tenant, Date: *date}, Retention: *retention})
	if errors.Is(err, committer.ErrLeaseHeld) {
		return fmt.Errorf("%w; stop it first or let it compact", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "compacted %d partitions: %d files into %d", res.Partitions, res.Compacted, res.Written)
	if res.Skipped > 0 {
		fmt.Fprintf(e.stdout, ", %d partitions skipped (see the log)", res.Skipped)
	}
	if res.TemplateFiles > 0 {
		fmt.Fprintf(e.stdout, "; %d templates files into 1", res.TemplateFiles)
	}
	if *retention {
		fmt.Fprintf(e.stdout, "; retention removed %d files", res.Expired)
		if res.Rewritten > 0 {
			fmt.Fprintf(e.stdout, " (the kept rows of %d of them rewritten)", res.Rewritten)
		}
	}
	fmt.Fprintln(e.stdout)
	return nil
}
