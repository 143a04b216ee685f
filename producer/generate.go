package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/quarrylake/quarry/streams"
)

// GenerateConfig configures the generator stage.
type GenerateConfig struct {
	Seed    int64    `yaml:"seed"`
	Tenants []string `yaml:"tenants"`
	// LinesPerTenant is how many lines of each tenant's stream to write.
	LinesPerTenant int `yaml:"lines_per_tenant"`
	// Lines sets framing and publishing; its Tenant and Source are ignored.
	Lines Config `yaml:"lines"`
}

// Defaults returns c with unset fields set to their defaults.
func (c GenerateConfig) Defaults() GenerateConfig {
	if c.Seed == 0 {
		c.Seed = 1
	}
	if len(c.Tenants) == 0 {
		c.Tenants = []string{"acme", "globex", "initech"}
	}
	if c.LinesPerTenant == 0 {
		c.LinesPerTenant = 100_000
	}
	c.Lines = c.Lines.Defaults()
	return c
}

// Validate reports every problem with c (after Defaults).
func (c GenerateConfig) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for _, t := range c.Tenants {
		if err := streams.CheckToken(t); err != nil {
			errs = append(errs, fmt.Errorf("generate.tenants: %w", err))
		}
		if seen[t] {
			errs = append(errs, fmt.Errorf("generate.tenants: %q twice", t))
		}
		seen[t] = true
	}
	if c.LinesPerTenant < 0 {
		errs = append(errs, fmt.Errorf("generate.lines_per_tenant %d: must not be negative", c.LinesPerTenant))
	}
	lc := c.Lines
	lc.Tenant, lc.Source = "x", ""
	if err := lc.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Generate writes the first LinesPerTenant lines of each tenant's generated
// stream (see Generator) through the line-source framing and publisher, one
// source "gen-<tenant>" per tenant. The streams are deterministic, so the
// sources resume like files: a second run with the same seed writes only
// lines beyond what the first one wrote.
type Generate struct {
	sources []*Lines
}

// NewGenerate returns the generator stage.
func NewGenerate(cfg GenerateConfig, deps Deps) (*Generate, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	gen := NewGenerator(cfg.Seed, cfg.Tenants)
	g := &Generate{}
	for _, t := range cfg.Tenants {
		lc := cfg.Lines
		lc.Tenant, lc.Source = t, ""
		src := &readerSource{r: gen.Reader(t, cfg.LinesPerTenant), maxRec: lc.MaxRecordBytes, skip: true, name: "generator"}
		l, err := newLines(lc, deps, src, "gen-"+t)
		if err != nil {
			return nil, err
		}
		g.sources = append(g.sources, l)
	}
	return g, nil
}

// Run runs every tenant's source until all are done or ctx ends.
func (g *Generate) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(g.sources))
	for i, l := range g.sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Run(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", l.Source(), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Sources are the per-tenant line sources.
func (g *Generate) Sources() []*Lines { return g.sources }

// Ready is nil when every source is ready.
func (g *Generate) Ready() error {
	var errs []error
	for _, l := range g.sources {
		if err := l.Ready(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.Source(), err))
		}
	}
	return errors.Join(errs...)
}

// Stats sums the sources' counters (Source "gen", Position the sum, LastSeq
// the highest).
func (g *Generate) Stats() Stats {
	sum := Stats{Source: "gen"}
	for _, l := range g.sources {
		s := l.Stats()
		sum.Add(s)
		sum.Position += s.Position
	}
	return sum
}

// AckLatencies merges the sources' publish→ack latencies.
func (g *Generate) AckLatencies() *LatencyHistogram {
	h := NewLatencyHistogram()
	for _, l := range g.sources {
		h.Merge(l.AckLatencies())
	}
	return h
}
