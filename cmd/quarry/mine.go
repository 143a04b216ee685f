package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/quarrylake/quarry/internal/mining"
)

func init() {
	register(&command{name: "mine", summary: "mine a file offline and print each line's template (the pipeline's miner code)", run: runMine})
}

type mineOutput struct {
	TemplateID uint64   `json:"template_id"`
	Template   string   `json:"template"`
	Params     []string `json:"params"`
}

// runMine mines FILE (or - for stdin) with the engine the pipeline runs and
// its built-in configuration, then prints one JSON object per input line in
// input order with the final text of the line's template. Params are the
// line's parameters against that final text.
func runMine(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("mine", flag.ContinueOnError)
	format := fs.String("format", "jsonl", "output format: jsonl")
	tenant := fs.String("tenant", "default", "tenant the lines belong to")
	rest, err := parseFlags(fs, e, args)
	if err != nil {
		return err
	}
	if *format != "jsonl" {
		return errUsage{fmt.Sprintf("--format %q: only jsonl is supported", *format)}
	}
	if len(rest) != 1 {
		return errUsage{"want exactly one FILE or -"}
	}
	var in io.Reader = e.stdin
	if rest[0] != "-" {
		f, err := os.Open(rest[0])
		if err != nil {
			return fmt.Errorf("open input: %w", err)
		}
		defer f.Close()
		in = f
	}
	m, err := mining.New(mining.DefaultConfig())
	if err != nil {
		return err
	}
	type mined struct {
		line string
		res  mining.Result
	}
	var all []mined
	r := bufio.NewReaderSize(in, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := r.ReadString('\n')
		if len(line) > 0 {
			line = strings.TrimSuffix(line, "\n")
			res, _ := m.Mine(*tenant, line, nil)
			all = append(all, mined{line, res})
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read input: %w", err)
		}
	}
	w := bufio.NewWriterSize(e.stdout, 1<<20)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	finals := map[uint64]*finalTemplate{}
	for _, x := range all {
		id := m.Canonical(x.res.ID)
		ft := finals[id]
		if ft == nil {
			_, _, text, ok := m.Template(id)
			if !ok { // evicted: fall back to the version the line was mined with
				text, _ = m.TemplateVersion(x.res.ID, x.res.Version)
			}
			ft = newFinalTemplate(text)
			finals[id] = ft
		}
		out := mineOutput{TemplateID: id, Template: ft.text, Params: ft.params(x.line)}
		if out.Params == nil {
			out.Params = x.res.Params
		}
		if err := enc.Encode(out); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	return w.Flush()
}

// finalTemplate extracts a line's parameters against a template's final text.
type finalTemplate struct {
	text string
	re   *regexp.Regexp
}

func newFinalTemplate(text string) *finalTemplate {
	parts := strings.Split(text, mining.Wildcard)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re, err := regexp.Compile(`(?s)\A` + strings.Join(parts, `(.*?)`) + `\z`)
	if err != nil {
		re = nil
	}
	return &finalTemplate{text: text, re: re}
}

// params returns the line's parameters, or nil when the line does not match
// the final text (the caller then keeps the parameters it was mined with).
func (f *finalTemplate) params(line string) []string {
	if f.re == nil {
		return nil
	}
	m := f.re.FindStringSubmatch(line)
	if m == nil {
		return nil
	}
	p := m[1:]
	if p == nil {
		p = []string{}
	}
	if got, err := mining.Render(f.text, p); err != nil || got != line {
		return nil
	}
	return p
}
