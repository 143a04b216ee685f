package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/natsutil"
	"github.com/quarrylake/quarry/subscribe"
)

func init() {
	register(&command{name: "tail", summary: "follow committed records as they are committed (the lake as tail -f)", run: runTail})
}

// runTail prints committed records from --from on, then every record the
// committer commits, until interrupted; it then prints on stderr the
// --from that resumes exactly after the last record printed.
func runTail(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	var c common
	c.register(fs, true)
	tenant := fs.String("tenant", "", "only this tenant")
	from := fs.String("from", "now", "where to start: beginning, now, a Delta version, a commit time (RFC 3339 or a duration ago like 1h) or cursor:<cursor>")
	format := fs.String("format", "raw", "raw (each original line exactly) or jsonl")
	poll := fs.Duration("poll", 2*time.Second, "how often to look at the Delta log when no commit notice arrives")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: quarry tail --lake URL [--nats URL] [--tenant T] [--from beginning|now|VERSION|TIME|cursor:C] [--format raw|jsonl] [QUERY]")
		fs.PrintDefaults()
	}
	rest, err := parseFlags(fs, e, args)
	if err != nil {
		return err
	}
	start, err := subscribe.ParseFrom(*from, time.Now())
	if err != nil {
		return errUsage{"--from: " + err.Error()}
	}
	if *format != "raw" && *format != "jsonl" {
		return errUsage{fmt.Sprintf("--format %q: want raw or jsonl", *format)}
	}
	if *poll <= 0 {
		return errUsage{fmt.Sprintf("--poll %s: must be positive", *poll)}
	}
	out, err := lake.NewFormatter(e.stdout, *format)
	if err != nil {
		return errUsage{err.Error()}
	}
	lk, err := openLake(ctx, fs, e, &c)
	if err != nil {
		return err
	}
	log, err := c.logger(e.stderr)
	if err != nil {
		return err
	}
	cfg := subscribe.Config{
		Store: lk.Records().Store(), Tenant: *tenant, Query: strings.Join(rest, " "), From: start,
		PollInterval: *poll, Log: log,
	}
	if c.conn.URL != "" {
		cc := c.conn
		cc.Name = "quarry-tail"
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		nc, js, err := natsutil.Connect(cctx, cc, log)
		cancel()
		if err != nil {
			return err
		}
		defer nc.Close()
		cfg.JS = js
	} else {
		log.Info("no --nats: following the Delta log by polling", "every", *poll)
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	sub, err := subscribe.Subscribe(sctx, cfg)
	cancel()
	if err != nil {
		if errors.Is(err, subscribe.ErrConfig) {
			return errUsage{err.Error()}
		}
		return err
	}
	defer sub.Close()
	for {
		r, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				fmt.Fprintf(e.stderr, "quarry tail: stopped; resume with --from cursor:%s\n", sub.Cursor())
				return nil
			}
			fmt.Fprintf(e.stderr, "quarry tail: resume with --from cursor:%s\n", sub.Cursor())
			return err
		}
		if err := out.Write(lake.Record{
			WALSeq: r.WALSeq, Index: r.Index, Tenant: r.Tenant, TS: r.TS, TemplateID: r.TemplateID,
			TemplateVersion: r.TemplateVersion, Params: r.Params, Attrs: r.Attrs, Source: r.Source, Line: r.Line,
		}); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
}
