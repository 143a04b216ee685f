// Package mining turns a stream of log lines into templates: it assigns every
// line of a tenant to a template (an id plus a version) and returns the
// parameters that, rendered into the template text, give the line back byte
// for byte.
//
// The engine is a Drain-style online clusterer with a token-class aware
// tokenizer: a line's header (timestamp, level, component; see header.go)
// is one parameter, the rest is split into whitespace runs, punctuation and
// chunks;
// chunks that look variable (numbers, hex, ids) are parameters on sight, and
// a line joins the most similar template of the same shape (same structural
// tokens, same first word). When a line joins a template whose literal
// differs from the line, that position becomes a parameter: the template
// widens and its version is incremented.
//
// A Model is single-goroutine and deterministic: its state after a sequence
// of (tenant, line) pairs is a pure function of that sequence. Template ids
// come from one counter shared by all tenants, start at 1 and are never
// reused, not even after eviction.
package mining

import (
	"errors"
	"fmt"
	"strings"
)

// Default configuration values.
const (
	DefaultMaxTemplatesPerTenant = 10000
	DefaultMaxLineBytes          = 64 << 10
	DefaultMaxTokens             = 1024
	DefaultSimilarity            = 0.5
	DefaultVariableAfter         = 4
	DefaultElasticSimilarity     = 0.9

	// HardMaxTokens bounds MaxTokens and the work Prepare does per line.
	HardMaxTokens = 1 << 16
)

// Wildcard is the parameter marker in template texts.
const Wildcard = "<*>"

// Config holds the generic knobs of the miner. The zero value is valid after
// Defaults. The defaults were chosen by leave-one-dataset-out evaluation
// (cmd/loghub-eval); users may override them per tenant and add masks.
type Config struct {
	// MaxTemplatesPerTenant caps the live templates of one tenant. When a
	// new template would exceed it, the tenant's least-recently-used
	// template is evicted (forgotten); its id is never reused. Evictions
	// are counted in Stats.
	MaxTemplatesPerTenant int `yaml:"max_templates_per_tenant"`
	// MaxLineBytes bounds the lines that are tokenized. A longer line is
	// assigned, whole, as the single parameter of the tenant's "oversized"
	// template whose text is "<*>".
	MaxLineBytes int `yaml:"max_line_bytes"`
	// MaxTokens bounds the tokens of a line (whitespace runs, punctuation
	// and words all count). A line with more tokens is treated like an
	// over-long line.
	MaxTokens int `yaml:"max_tokens"`
	// Similarity is the minimum fraction of matching word positions for a
	// line to join an existing template (0 < Similarity <= 1).
	Similarity float64 `yaml:"similarity"`
	// VariableAfter is how many distinct words a position must show before
	// it becomes a parameter. Until then a line that differs from a
	// template only in such words gets a template of its own (words like
	// "startup"/"shutdown" usually name different events); once the
	// position proves variable, those templates are merged (EventMerged).
	// Variable-looking tokens (numbers, ids) never wait. 1 widens at once.
	VariableAfter int `yaml:"variable_after"`
	// ElasticSimilarity is the minimum share of words a line of a new
	// shape must have in common (in order) with an existing template of
	// the same anchor word for that template to become elastic and take
	// the line (see elastic.go). A value above 1 disables elastic
	// templates.
	ElasticSimilarity float64 `yaml:"elastic_similarity"`
	// Masks are named regular expressions whose matches are parameters
	// on sight, applied in order (see Mask). Without masks, mining costs
	// nothing more.
	Masks []Mask `yaml:"masks"`
	// MatchOnly assigns lines to existing templates only: a line joins a
	// template it fits as it is (no template is created or widened); a
	// line that fits none is assigned whole to the tenant's catch-all
	// template "<*>" (counted in Stats.Unmatched). Use it with a model
	// restored from a snapshot of a learning run.
	MatchOnly bool `yaml:"match_only"`
	// Tenants overrides the settings above per tenant name.
	Tenants map[string]TenantConfig `yaml:"tenants"`
}

// DefaultConfig returns the default configuration.
func DefaultConfig() Config { return Config{}.Defaults() }

// Defaults returns c with its zero fields set to the defaults.
func (c Config) Defaults() Config {
	if c.MaxTemplatesPerTenant == 0 {
		c.MaxTemplatesPerTenant = DefaultMaxTemplatesPerTenant
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = DefaultMaxLineBytes
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.Similarity == 0 {
		c.Similarity = DefaultSimilarity
	}
	if c.VariableAfter == 0 {
		c.VariableAfter = DefaultVariableAfter
	}
	if c.ElasticSimilarity == 0 {
		c.ElasticSimilarity = DefaultElasticSimilarity
	}
	return c
}

// Validate reports every problem of c (after Defaults, zero fields are fine).
func (c Config) Validate() error {
	var errs []error
	if c.MaxTemplatesPerTenant < 0 {
		errs = append(errs, fmt.Errorf("max_templates_per_tenant must not be negative, got %d", c.MaxTemplatesPerTenant))
	}
	if c.MaxLineBytes < 0 {
		errs = append(errs, fmt.Errorf("max_line_bytes must not be negative, got %d", c.MaxLineBytes))
	}
	if c.MaxTokens < 0 || c.MaxTokens > HardMaxTokens {
		errs = append(errs, fmt.Errorf("max_tokens must be in [0, %d], got %d", HardMaxTokens, c.MaxTokens))
	}
	if c.Similarity < 0 || c.Similarity > 1 || c.Similarity != c.Similarity {
		errs = append(errs, fmt.Errorf("similarity must be in [0, 1], got %v", c.Similarity))
	}
	if c.ElasticSimilarity < 0 || c.ElasticSimilarity != c.ElasticSimilarity {
		errs = append(errs, fmt.Errorf("elastic_similarity must not be negative, got %v", c.ElasticSimilarity))
	}
	if c.VariableAfter < 0 || c.VariableAfter > 64 {
		errs = append(errs, fmt.Errorf("variable_after must be in [0, 64], got %d", c.VariableAfter))
	}
	errs = append(errs, c.validateControl()...)
	return errors.Join(errs...)
}

// EventKind says what happened to a template.
type EventKind uint8

const (
	// EventCreated: a new template (Version 1).
	EventCreated EventKind = 1
	// EventChanged: a template widened to a new version; Previous holds
	// the text of the version before.
	EventChanged EventKind = 2
	// EventMerged: template ID (text in Previous, unchanged at Version)
	// was merged into template Into, whose current text is Template. Lines
	// that would have matched ID are assigned to Into from now on; lines
	// already mined with ID still render with TemplateVersion(ID, Version).
	EventMerged EventKind = 3
)

// String returns the event kind's name.
func (k EventKind) String() string {
	switch k {
	case EventCreated:
		return "created"
	case EventChanged:
		return "changed"
	case EventMerged:
		return "merged"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event reports a template creation or change.
type Event struct {
	Kind     EventKind
	ID       uint64
	Tenant   string
	Version  uint32
	Template string // new text, params as <*>
	Previous string // old text for EventChanged; the merged template's text for EventMerged
	Into     uint64 // EventMerged: the surviving template
	// Kinds holds, for EventCreated and EventChanged, the kind of each
	// <*> of Template in order: the name of the mask that made it, or ""
	// (nil when no parameter came from a mask).
	Kinds []string
}

// Result is the assignment of one line.
type Result struct {
	// ID is the cluster-wide template id (one counter for all tenants,
	// starting at 1, never reused).
	ID uint64
	// Version of the template the line was rendered against; starts at 1.
	Version uint32
	// Params are substrings of the line such that
	// Render(TemplateVersion(ID, Version), Params) == line.
	Params []string
}

// Stats summarises a model for metrics.
type Stats struct {
	Lines     uint64 // lines mined
	Templates int    // live templates over all tenants
	Created   uint64 // templates ever created
	Changes   uint64 // template version increments
	Evictions uint64 // templates evicted by the per-tenant cap
	Oversized uint64 // lines assigned whole to an oversized template
	Merges    uint64 // templates merged into another (see EventMerged)
	Unmatched uint64 // match-only lines that fit no template (catch-all)
	Dropped   uint64 // templates of an older engine's snapshot left behind at Restore (re-learnt)
	Tenants   []TenantStats
}

// TenantStats are the per-tenant figures, in tenant name order.
type TenantStats struct {
	Tenant    string
	Templates int
	Evictions uint64
}

// Render splits template on "<*>" and interleaves params. It fails when the
// number of parameters differs from the number of wildcards.
func Render(template string, params []string) (string, error) {
	if n := strings.Count(template, Wildcard); n != len(params) {
		return "", fmt.Errorf("render: template has %d wildcards, got %d params", n, len(params))
	}
	if len(params) == 0 {
		return template, nil
	}
	size := len(template) - len(params)*len(Wildcard)
	for _, p := range params {
		size += len(p)
	}
	var b strings.Builder
	b.Grow(size)
	for _, p := range params {
		i := strings.Index(template, Wildcard)
		b.WriteString(template[:i])
		b.WriteString(p)
		template = template[i+len(Wildcard):]
	}
	b.WriteString(template)
	return b.String(), nil
}
