package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quarrylake/quarry/internal/dlq"
	"github.com/quarrylake/quarry/internal/natsutil"
)

func init() {
	register(&command{name: "dlq", summary: "list, show, replay or drop dead letters (quarry dlq list|show|replay|drop)", run: runDLQ})
}

var dlqStages = []string{"producer", "encoder", "committer"}

const dlqUsage = `usage: quarry dlq list|show|replay|drop --nats URL [--stage S] [--limit N] [--json] [SEQ...]
  list    the dead letters: stage, reason, tenant, source, subject, size (--stage, --limit)
  show    the dead letters SEQ... with their headers and payloads
  replay  publish the encoder's or committer's dead letters SEQ... again to their
          subject, exactly once, and delete them (a producer's holds a cut line: drop it)
  drop    delete the dead letters SEQ...
Run 'quarry dlq list -h' for the flags.
`

// runDLQ: quarry dlq list|show|replay|drop --nats URL [--stage S] [--limit N] [--json] [SEQ...]
func runDLQ(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(e.stderr, dlqUsage)
		return errHelp
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return errUsage{"a subcommand is required: list, show, replay or drop"}
	}
	sub := args[0]
	if sub != "list" && sub != "show" && sub != "replay" && sub != "drop" {
		return errUsage{fmt.Sprintf("unknown subcommand %q: want list, show, replay or drop", sub)}
	}
	fs := flag.NewFlagSet("dlq "+sub, flag.ContinueOnError)
	var c common
	c.register(fs, false)
	stage := fs.String("stage", "", "only dead letters of this stage: "+strings.Join(dlqStages, ", "))
	limit := fs.Int("limit", 100, "list at most this many dead letters")
	asJSON := fs.Bool("json", false, "print JSON (one object per line) instead of a table")
	rest, err := parseFlags(fs, e, args[1:])
	if err != nil {
		return err
	}
	if *stage != "" && !contains(dlqStages, *stage) {
		return errUsage{fmt.Sprintf("--stage %q: want one of %s", *stage, strings.Join(dlqStages, ", "))}
	}
	if *limit < 1 {
		return errUsage{fmt.Sprintf("--limit %d: must be at least 1", *limit)}
	}
	var seqs []uint64
	for _, a := range rest {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil || n == 0 {
			return errUsage{fmt.Sprintf("%q is not a dead-letter sequence (a positive integer)", a)}
		}
		seqs = append(seqs, n)
	}
	switch {
	case sub == "list" && len(seqs) > 0:
		return errUsage{"list takes no sequences (use show)"}
	case sub != "list" && len(seqs) == 0:
		return errUsage{sub + " needs at least one dead-letter sequence (see quarry dlq list)"}
	}
	cc, err := c.resolve(fs, e)
	if err != nil {
		return err
	}
	if cc.URL == "" {
		return errUsage{"--nats is required (or QUARRY_NATS_URL, or nats.url in the config)"}
	}
	cc.Name = "quarry-dlq"
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nc, js, err := natsutil.Connect(cctx, cc, c.warnLogger(e.stderr))
	if err != nil {
		return err
	}
	defer nc.Close()
	out := dlqPrinter{w: e.stdout, json: *asJSON}
	switch sub {
	case "list":
		es, err := dlq.List(cctx, js, *stage, *limit)
		if err != nil {
			return err
		}
		return out.list(es)
	case "show":
		var es []dlq.Entry
		for _, s := range seqs {
			en, err := dlq.Get(cctx, js, s)
			if err != nil {
				return err
			}
			es = append(es, en)
		}
		return out.show(es)
	case "replay":
		var errs []error
		for _, s := range seqs {
			res, err := dlq.Replay(cctx, js, s)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out.result(res)
		}
		return errors.Join(errs...)
	default: // drop
		var errs []error
		for _, s := range seqs {
			if err := dlq.Drop(cctx, js, s); err != nil {
				errs = append(errs, err)
				continue
			}
			out.dropped(s)
		}
		return errors.Join(errs...)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

type dlqPrinter struct {
	w    io.Writer
	json bool
}

func (p dlqPrinter) emit(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(p.w, "%s\n", b)
}

func (p dlqPrinter) list(es []dlq.Entry) error {
	if p.json {
		for _, en := range es {
			en.Payload, en.Headers = nil, nil
			p.emit(en)
		}
		return nil
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tSTAGE\tTENANT\tSOURCE\tSUBJECT\tBYTES\tREASON")
	for _, en := range es {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", en.Seq, en.Time.Format(time.RFC3339), en.Stage, dash(en.Tenant),
			dash(en.Source), dash(en.OrigSubject), en.Size, oneLine(en.Reason, 80))
	}
	return tw.Flush()
}

func (p dlqPrinter) show(es []dlq.Entry) error {
	for _, en := range es {
		if p.json {
			p.emit(en) // the payload as base64
			continue
		}
		fmt.Fprintf(p.w, "seq:          %d\ntime:         %s\nstage:        %s\nreason:       %s\nsubject:      %s\n",
			en.Seq, en.Time.Format(time.RFC3339Nano), en.Stage, en.Reason, dash(en.OrigSubject))
		if en.OrigSeq > 0 {
			fmt.Fprintf(p.w, "original seq: %d\n", en.OrigSeq)
		}
		fmt.Fprintf(p.w, "tenant:       %s\nsource:       %s\n", dash(en.Tenant), dash(en.Source))
		if en.Offset != "" {
			fmt.Fprintf(p.w, "offset:       %s\n", en.Offset)
		}
		const maxShow = 4096
		payload := en.Payload
		more := ""
		if len(payload) > maxShow {
			payload, more = payload[:maxShow], fmt.Sprintf(" ... (%d more bytes)", len(en.Payload)-maxShow)
		}
		fmt.Fprintf(p.w, "payload:      %d bytes\n%q%s\n\n", en.Size, payload, more)
	}
	return nil
}

func (p dlqPrinter) result(r dlq.Result) {
	if p.json {
		p.emit(r)
		return
	}
	switch {
	case r.AlreadyDone:
		fmt.Fprintf(p.w, "dead letter %d: already replayed or dropped, nothing sent\n", r.Seq)
	case r.Published:
		fmt.Fprintf(p.w, "dead letter %d: replayed to %s (%s seq %d) and removed\n", r.Seq, r.Subject, r.Stream, r.StreamSeq)
	default:
		fmt.Fprintf(p.w, "dead letter %d: an earlier replay had sent it (%s seq %d); removed\n", r.Seq, r.Stream, r.StreamSeq)
	}
}

func (p dlqPrinter) dropped(seq uint64) {
	if p.json {
		p.emit(map[string]any{"seq": seq, "dropped": true})
		return
	}
	fmt.Fprintf(p.w, "dead letter %d: dropped\n", seq)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
