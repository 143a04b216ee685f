package mining

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
)

// User control: masks, per-tenant settings and match-only mode.

// Mask is a named regular expression: every match in a line is a parameter
// on sight. The template text shows it as <*> like any parameter; the name
// is the parameter's kind (see Model.Kinds and Event.Kinds).
type Mask struct {
	// Name is the kind recorded for the parameter: a letter, then
	// letters, digits or '_'.
	Name string `yaml:"name"`
	// Regex is a Go regular expression (RE2 syntax). It must not match
	// the empty string.
	Regex string `yaml:"regex"`
}

// TenantConfig overrides the mining settings of one tenant. Zero fields
// inherit the top-level value.
type TenantConfig struct {
	Similarity        float64 `yaml:"similarity"`
	VariableAfter     int     `yaml:"variable_after"`
	ElasticSimilarity float64 `yaml:"elastic_similarity"`
	// Masks are applied after the top-level masks.
	Masks []Mask `yaml:"masks"`
	// MatchOnly, when set, overrides the top-level match_only.
	MatchOnly *bool `yaml:"match_only"`
}

// maxMasks bounds the masks of one tenant (a mask index is a byte).
const maxMasks = 200

var maskName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// validateMasks reports every problem of masks, under key (e.g. "masks").
// seen holds the names already taken and is extended.
func validateMasks(key string, masks []Mask, seen map[string]bool) []error {
	var errs []error
	for i, mk := range masks {
		k := fmt.Sprintf("%s[%d]", key, i)
		if !maskName.MatchString(mk.Name) {
			errs = append(errs, fmt.Errorf("%s.name must be a letter followed by letters, digits or '_', got %q", k, mk.Name))
		} else if seen[mk.Name] {
			errs = append(errs, fmt.Errorf("%s.name %q is used twice", k, mk.Name))
		}
		seen[mk.Name] = true
		re, err := regexp.Compile(mk.Regex)
		switch {
		case mk.Regex == "":
			errs = append(errs, fmt.Errorf("%s.regex must not be empty", k))
		case err != nil:
			errs = append(errs, fmt.Errorf("%s.regex: %w", k, err))
		case re.MatchString(""):
			errs = append(errs, fmt.Errorf("%s.regex %q matches the empty string", k, mk.Regex))
		}
	}
	if len(seen) > maxMasks {
		errs = append(errs, fmt.Errorf("%s: more than %d masks", key, maxMasks))
	}
	return errs
}

// validateControl reports the problems of the masks and tenant overrides.
func (c Config) validateControl() []error {
	seen := map[string]bool{}
	errs := validateMasks("masks", c.Masks, seen)
	names := make([]string, 0, len(c.Tenants))
	for n := range c.Tenants {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		tc := c.Tenants[n]
		k := fmt.Sprintf("tenants.%s", n)
		if n == "" {
			errs = append(errs, errors.New("tenants: empty tenant name"))
		}
		if tc.Similarity < 0 || tc.Similarity > 1 || tc.Similarity != tc.Similarity {
			errs = append(errs, fmt.Errorf("%s.similarity must be in [0, 1], got %v", k, tc.Similarity))
		}
		if tc.ElasticSimilarity < 0 || tc.ElasticSimilarity != tc.ElasticSimilarity {
			errs = append(errs, fmt.Errorf("%s.elastic_similarity must not be negative, got %v", k, tc.ElasticSimilarity))
		}
		if tc.VariableAfter < 0 || tc.VariableAfter > 64 {
			errs = append(errs, fmt.Errorf("%s.variable_after must be in [0, 64], got %d", k, tc.VariableAfter))
		}
		errs = append(errs, validateMasks(k+".masks", tc.Masks, maps2(seen))...)
	}
	return errs
}

func maps2(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// compiledMask is a Mask ready to apply.
type compiledMask struct {
	name string
	re   *regexp.Regexp
}

// settings are the effective knobs of one tenant.
type settings struct {
	similarity        float64
	variableAfter     int
	elasticSimilarity float64
	matchOnly         bool
	masks             []compiledMask
}

// compileSettings returns the default settings and those of each
// configured tenant. cfg must be valid.
func compileSettings(cfg Config) (*settings, map[string]*settings) {
	compile := func(ms []Mask) []compiledMask {
		out := make([]compiledMask, 0, len(ms))
		for _, mk := range ms {
			out = append(out, compiledMask{name: mk.Name, re: regexp.MustCompile(mk.Regex)})
		}
		return out
	}
	def := &settings{
		similarity: cfg.Similarity, variableAfter: cfg.VariableAfter,
		elasticSimilarity: cfg.ElasticSimilarity, matchOnly: cfg.MatchOnly, masks: compile(cfg.Masks),
	}
	per := make(map[string]*settings, len(cfg.Tenants))
	for n, tc := range cfg.Tenants {
		s := *def
		if tc.Similarity != 0 {
			s.similarity = tc.Similarity
		}
		if tc.VariableAfter != 0 {
			s.variableAfter = tc.VariableAfter
		}
		if tc.ElasticSimilarity != 0 {
			s.elasticSimilarity = tc.ElasticSimilarity
		}
		if tc.MatchOnly != nil {
			s.matchOnly = *tc.MatchOnly
		}
		if len(tc.Masks) > 0 {
			s.masks = append(slices.Clip(def.masks), compile(tc.Masks)...)
		}
		per[n] = &s
	}
	return def, per
}

// applyMasks turns every match of the tenant's masks into one variable
// token (earlier masks and earlier matches win on overlap; the header is
// left alone) and cuts the tokens it overlaps. It returns the new tokens in
// buf, or buf and false when no mask matched (toks stand as they are).
func applyMasks(masks []compiledMask, line string, toks, buf []token) ([]token, bool) {
	type span struct {
		s, e int32
		mask uint8
	}
	var spans []span
	lo := int32(0)
	if len(toks) > 0 && toks[0].head {
		lo = toks[0].end
	}
	for mi, mk := range masks {
		for _, loc := range mk.re.FindAllStringIndex(line, -1) {
			s, e := int32(loc[0]), int32(loc[1])
			if e <= s || s < lo {
				continue
			}
			free := true
			for _, o := range spans {
				if s < o.e && o.s < e {
					free = false
					break
				}
			}
			if free {
				spans = append(spans, span{s, e, uint8(mi + 1)})
			}
		}
	}
	if len(spans) == 0 {
		return buf, false
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.s - b.s) })
	out := buf[:0]
	p := 0
	emitted := make([]bool, len(spans))
	for _, tk := range toks {
		if tk.start == tk.end { // an empty value: dropped inside a mask
			inside := false
			for _, sp := range spans {
				if sp.s < tk.start && tk.start < sp.e {
					inside = true
				}
			}
			if !inside {
				out = append(out, tk)
			}
			continue
		}
		cur := tk.start
		for p < len(spans) && spans[p].s < tk.end {
			sp := spans[p]
			if sp.s > cur {
				out = append(out, token{cur, sp.s, tk.kind, tk.head, 0})
			}
			if !emitted[p] {
				out = append(out, token{sp.s, sp.e, kVar, false, sp.mask})
				emitted[p] = true
			}
			cur = max(cur, sp.e)
			if sp.e > tk.end {
				break
			}
			p++
		}
		if cur < tk.end {
			out = append(out, token{cur, tk.end, tk.kind, tk.head, 0})
		}
	}
	return out, true
}
