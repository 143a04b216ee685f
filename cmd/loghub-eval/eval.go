package main

// Scoring of the template miner against the Loghub-2k corpus the way
// Loghub-2.0's benchmark does: grouping accuracy (GA), parsing accuracy
// (PA), F1 of grouping accuracy (FGA) and F1 of template accuracy (FTA).
//
// The data are read from a directory (never copied into the repository):
// for each dataset D, the Content and EventTemplate columns of
// D/D_2k.log_structured_corrected.csv.

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/quarrylake/quarry/internal/mining"
)

// Datasets are the Loghub-2k datasets scored, in report order.
var Datasets = []string{"Android", "Apache", "BGL", "HDFS", "HPC", "Hadoop", "Linux", "OpenSSH", "Proxifier", "Spark", "Windows"}

// DrainGA holds Drain's published Loghub-2k grouping accuracy (Zhu et al.,
// "Tools and Benchmarks for Automated Log Parsing", ICSE-SEIP 2019). They
// are the per-dataset floors.
var DrainGA = map[string]float64{
	"HDFS": .998, "Hadoop": .948, "Spark": .920, "BGL": .963, "HPC": .887, "Windows": .997,
	"Linux": .690, "Apache": 1.0, "Proxifier": .527, "Android": .911, "OpenSSH": .788,
}

// Average floors.
const (
	MinAverageGA = 0.95
	MinAveragePA = 0.80
	// Held-one-out floors (see LeaveOneOut).
	MinLOOGA = 0.95
	MinLOOPA = 0.85
	// MaxHeaderCost is the most GA a dataset may lose when its raw lines,
	// headers included, are mined instead of the contents.
	MaxHeaderCost = 0.01
)

// DefaultDir returns $LOGHUB_DIR, or the first of the conventional locations
// that exists.
func DefaultDir() string {
	if d := os.Getenv("LOGHUB_DIR"); d != "" {
		return d
	}
	for _, d := range []string{"/work/shared/loghub2k", "../shared/loghub2k", "../../shared/loghub2k", "../../../shared/loghub2k"} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
	}
	return "/work/shared/loghub2k"
}

// Dataset is one labelled Loghub-2k dataset.
type Dataset struct {
	Name      string
	Content   []string
	Templates []string // ground-truth EventTemplate per line
}

// Load reads dataset name from dir.
func Load(dir, name string) (*Dataset, error) {
	path := filepath.Join(dir, name, name+"_2k.log_structured_corrected.csv")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", name, err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("load %s: header: %w", path, err)
	}
	ci, ti := -1, -1
	for i, h := range head {
		switch strings.TrimPrefix(h, "\ufeff") {
		case "Content":
			ci = i
		case "EventTemplate":
			ti = i
		}
	}
	if ci < 0 || ti < 0 {
		return nil, fmt.Errorf("load %s: no Content/EventTemplate columns in %q", path, head)
	}
	d := &Dataset{Name: name}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", path, err)
		}
		if len(rec) <= ci || len(rec) <= ti {
			return nil, fmt.Errorf("load %s: short record %q", path, rec)
		}
		d.Content = append(d.Content, rec[ci])
		d.Templates = append(d.Templates, rec[ti])
	}
	return d, nil
}

// Scores are the accuracy figures of one dataset.
type Scores struct {
	Dataset            string
	GA, PA, FGA, FTA   float64
	PredGroups, Truths int
}

// Prediction is the miner's output for a dataset: the template id of every
// line and the final text of every template.
type Prediction struct {
	IDs   []uint64
	Texts map[uint64]string
}

// Mine runs a fresh model over the dataset's Content column (one tenant)
// and returns, per line, its final template id (following merges, see
// mining.EventMerged) and each template's final text (as a batch parser
// like Drain reports them).
func Mine(cfg mining.Config, d *Dataset) (*Prediction, error) {
	m, err := mining.New(cfg)
	if err != nil {
		return nil, err
	}
	p := &Prediction{IDs: make([]uint64, len(d.Content)), Texts: map[uint64]string{}}
	for i, line := range d.Content {
		res, _ := m.Mine(d.Name, line, nil)
		text, ok := m.TemplateVersion(res.ID, res.Version)
		if !ok {
			return nil, fmt.Errorf("%s line %d: template %d v%d missing", d.Name, i+1, res.ID, res.Version)
		}
		if got, err := mining.Render(text, res.Params); err != nil || got != line {
			return nil, fmt.Errorf("%s line %d: does not round-trip (%v)", d.Name, i+1, err)
		}
		p.IDs[i] = res.ID
	}
	for i, id := range p.IDs {
		id = m.Canonical(id)
		p.IDs[i] = id
		if _, ok := p.Texts[id]; ok {
			continue
		}
		_, _, text, ok := m.Template(id)
		if !ok {
			return nil, fmt.Errorf("%s: template %d evicted; raise max_templates_per_tenant", d.Name, id)
		}
		p.Texts[id] = text
	}
	return p, nil
}

// Score computes GA, PA, FGA and FTA of a prediction. Predicted groups are
// template ids; predicted template strings are normalised with Normalize.
func Score(d *Dataset, p *Prediction) Scores {
	n := len(d.Content)
	s := Scores{Dataset: d.Name}
	// ground-truth group sizes
	truthSize := map[string]int{}
	for _, t := range d.Templates {
		truthSize[t]++
	}
	predLines := map[uint64][]int{}
	var order []uint64
	for i, id := range p.IDs {
		if _, ok := predLines[id]; !ok {
			order = append(order, id)
		}
		predLines[id] = append(predLines[id], i)
	}
	norm := map[uint64]string{}
	for _, id := range order {
		norm[id] = Normalize(p.Texts[id])
	}
	correctLines, correctGroups, correctTemplates, pa := 0, 0, 0, 0
	for _, id := range order {
		lines := predLines[id]
		first := d.Templates[lines[0]]
		same := true
		for _, i := range lines[1:] {
			if d.Templates[i] != first {
				same = false
				break
			}
		}
		if same && truthSize[first] == len(lines) {
			correctLines += len(lines)
			correctGroups++
		}
		// Template accuracy (loghub-2.0): the group's ground-truth
		// templates are exactly {its predicted template}.
		if same && norm[id] == first {
			correctTemplates++
		}
		for _, i := range lines {
			if norm[id] == d.Templates[i] {
				pa++
			}
		}
	}
	s.PredGroups, s.Truths = len(order), len(truthSize)
	s.GA = float64(correctLines) / float64(n)
	s.PA = float64(pa) / float64(n)
	s.FGA = f1(float64(correctGroups)/float64(len(order)), float64(correctGroups)/float64(len(truthSize)))
	s.FTA = f1(float64(correctTemplates)/float64(len(order)), float64(correctTemplates)/float64(len(truthSize)))
	return s
}

func f1(p, r float64) float64 {
	if p+r == 0 {
		return 0
	}
	return 2 * p * r / (p + r)
}

var (
	spaceRun = regexp.MustCompile(`\s+`)
	// Loghub-2.0's token delimiters for the DG and WV rules.
	delimRe  = regexp.MustCompile(`[\s,!;:=|"'\[\](){}.\-+@#$%&]`)
	digitsRe = regexp.MustCompile(`^\d+$`)
	wvRe     = regexp.MustCompile(`^[^\s/]*<\*>[^\s/]*$`)
)

// Normalize applies to a predicted template the rule-based part of
// Loghub-2.0's correct_single_template
// (benchmark/evaluation/utils/post_process.py), in its order:
//
//   - DS: trim, collapse whitespace runs to one space;
//   - DG: a token of digits only becomes <*>;
//   - WV: a token containing <*> (and no '/') becomes <*>;
//   - DV: "<*>.<*>" becomes <*>, repeatedly;
//   - CV: "<*><*>" becomes <*>, repeatedly.
//
// Tokens are delimited by whitespace and , ! ; : = | " ' [ ] ( ) { } . - +
// @ # $ % &, as there. The ad-hoc substitutions that follow in that
// function ("<*>:<*>" to <*> and the like) are not applied: the corrected
// ground truth itself keeps "<*>:<*>".
func Normalize(t string) string {
	t = strings.TrimSpace(t)
	t = spaceRun.ReplaceAllString(t, " ")
	var b strings.Builder
	last := 0
	emit := func(tok string) {
		if digitsRe.MatchString(tok) || (wvRe.MatchString(tok) && tok != "<*>/<*>") {
			tok = mining.Wildcard
		}
		b.WriteString(tok)
	}
	for _, loc := range delimRe.FindAllStringIndex(t, -1) {
		emit(t[last:loc[0]])
		b.WriteString(t[loc[0]:loc[1]])
		last = loc[1]
	}
	emit(t[last:])
	t = b.String()
	for strings.Contains(t, "<*>.<*>") {
		t = strings.ReplaceAll(t, "<*>.<*>", mining.Wildcard)
	}
	for strings.Contains(t, "<*><*>") {
		t = strings.ReplaceAll(t, "<*><*>", mining.Wildcard)
	}
	return t
}

// Report formats the scores as a Markdown table with averages and returns
// the floors that were missed. Averages are only checked when all is set.
func Report(rows []Scores, all bool) (string, []string) {
	var b strings.Builder
	var failures []string
	b.WriteString("| Dataset | GA | PA | FGA | FTA | templates (found/truth) | Drain GA (published) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	var ga, pa, fga, fta, dga float64
	for _, s := range rows {
		floor, known := DrainGA[s.Dataset]
		mark := ""
		if known && s.GA+1e-9 < floor {
			mark = " ✗"
			failures = append(failures, fmt.Sprintf("%s GA %.3f < %.3f", s.Dataset, s.GA, floor))
		}
		fmt.Fprintf(&b, "| %s | %.3f%s | %.3f | %.3f | %.3f | %d/%d | %.3f |\n", s.Dataset, s.GA, mark, s.PA, s.FGA, s.FTA, s.PredGroups, s.Truths, floor)
		ga += s.GA
		pa += s.PA
		fga += s.FGA
		fta += s.FTA
		dga += floor
	}
	if n := float64(len(rows)); n > 0 {
		fmt.Fprintf(&b, "| **Average** | **%.3f** | **%.3f** | **%.3f** | **%.3f** | | %.3f |\n", ga/n, pa/n, fga/n, fta/n, dga/n)
		if all {
			if ga/n+1e-9 < MinAverageGA {
				failures = append(failures, fmt.Sprintf("average GA %.3f < %.2f", ga/n, MinAverageGA))
			}
			if pa/n+1e-9 < MinAveragePA {
				failures = append(failures, fmt.Sprintf("average PA %.3f < %.2f", pa/n, MinAveragePA))
			}
		}
	}
	return b.String(), failures
}

// Document wraps a report table into docs/accuracy.md.
func Document(table, loo, raw, sensitivity string, cfg mining.Config) string {
	var b strings.Builder
	b.WriteString("# Template-mining accuracy on Loghub-2k\n\n")
	b.WriteString("Generated by `go run ./cmd/loghub-eval -write docs/accuracy.md` (do not edit by hand).\n\n")
	fmt.Fprintf(&b, "One generic configuration for every dataset: `mining.DefaultConfig()` = %+v.\n\n", cfg)
	b.WriteString(table)
	b.WriteString("\n## Leave one dataset out\n\n")
	b.WriteString(looIntro)
	b.WriteString(loo)
	b.WriteString("\n## Raw lines, headers included\n\n")
	b.WriteString(rawIntro)
	b.WriteString(raw)
	b.WriteString(methodology)
	b.WriteString(sensitivity)
	return b.String()
}

// Sensitivity re-scores the datasets with each generic knob moved away
// from its default, one at a time, and returns a Markdown table of the
// averages (a check that the defaults are not a knife-edge fit).
func Sensitivity(dir string, names []string, base mining.Config) (string, error) {
	type variant struct {
		knob string
		cfg  mining.Config
	}
	var vs []variant
	for _, v := range []int{2, 3, 4, 5, 6} {
		c := base
		c.VariableAfter = v
		vs = append(vs, variant{fmt.Sprintf("variable_after = %d", v), c})
	}
	for _, v := range []float64{0.4, 0.5, 0.6, 0.7} {
		c := base
		c.Similarity = v
		vs = append(vs, variant{fmt.Sprintf("similarity = %.1f", v), c})
	}
	for _, v := range []float64{0.7, 0.8, 0.9, 2} {
		c := base
		c.ElasticSimilarity = v
		label := fmt.Sprintf("elastic_similarity = %.1f", v)
		if v > 1 {
			label = "elastic templates off"
		}
		vs = append(vs, variant{label, c})
	}
	var ds []*Dataset
	for _, n := range names {
		d, err := Load(dir, n)
		if err != nil {
			return "", err
		}
		ds = append(ds, d)
	}
	var b strings.Builder
	b.WriteString("\n## Sensitivity of the generic knobs\n\n")
	b.WriteString("Each row moves one knob away from the default (all datasets, averages).\n\n")
	b.WriteString("| knob | avg GA | avg PA | datasets below Drain GA |\n|---|---:|---:|---:|\n")
	for _, v := range vs {
		var ga, pa float64
		below := 0
		for _, d := range ds {
			p, err := Mine(v.cfg, d)
			if err != nil {
				return "", err
			}
			s := Score(d, p)
			ga += s.GA
			pa += s.PA
			if floor, ok := DrainGA[d.Name]; ok && s.GA+1e-9 < floor {
				below++
			}
		}
		mark := ""
		if sameKnobs(v.cfg, base) {
			mark = " (default)"
		}
		n := float64(len(ds))
		fmt.Fprintf(&b, "| %s%s | %.3f | %.3f | %d |\n", v.knob, mark, ga/n, pa/n, below)
	}
	return b.String(), nil
}

const looIntro = `For each dataset in turn, the knobs (similarity, variable_after,
elastic_similarity, on a small grid that includes the defaults) are chosen to
maximise mean GA + PA on the ten other datasets, and the held dataset is scored
with them. The held-one-out average estimates accuracy on logs no setting was
fitted to; a change that raises the plain average and lowers this one is
rejected. The command exits 1 when the held-one-out average GA < 0.95 or PA < 0.85.

`

const rawIntro = `Each raw ` + "`D_2k.log`" + ` line, with its timestamp, level, component and pid, is
mined (one fresh model per dataset) and its grouping scored against the same
ground truth. Template texts then include the header, so only GA and FGA are
meaningful. The command exits 1 when the header costs more than 0.01 GA on any
dataset.

`

const methodology = `
## Method

* **Data**: for each dataset D, the ` + "`Content`" + ` column of
  ` + "`D/D_2k.log_structured_corrected.csv`" + ` (Loghub-2.0's corrected
  Loghub-2k ground truth; Android and Windows from logparser's
  ` + "`loghub_2k_corrected`" + `), read with encoding/csv from ` + "`$LOGHUB_DIR`" + `
  (default ` + "`/work/shared/loghub2k`" + `). The data are never copied into this repository.
* **Mining**: one fresh ` + "`mining.Model`" + ` per dataset, one tenant, lines in file
  order. Each line must round-trip (` + "`Render(TemplateVersion(id, v), params) == line`" + `)
  or the run fails. A line's predicted group is its template id followed
  through merges (` + "`Model.Canonical`" + `, see ` + "`EventMerged`" + `) at the end of the run,
  and its predicted template is that template's *final* text (what a batch
  parser such as Drain reports).
* **GA** (grouping accuracy): a line is correct when the set of lines sharing
  its predicted template id equals the set of lines sharing its ground-truth
  template. Predicted groups are template ids (not template strings).
* **PA** (parsing accuracy): a line is correct when its normalised predicted
  template string equals its ground-truth ` + "`EventTemplate`" + ` exactly.
* **FGA**: F1 of the group-level precision/recall (correct groups / predicted
  groups, correct groups / ground-truth groups).
* **FTA**: F1 of template accuracy; a predicted template is correct when all
  its lines share one ground-truth template and that template equals the
  normalised predicted string (Loghub-2.0's ` + "`evaluate_template_level`" + `).
* **Normalisation** of predicted templates (ground truth is used as is) follows
  the rule-based part of Loghub-2.0's ` + "`correct_single_template`" + `
  (` + "`benchmark/evaluation/utils/post_process.py`" + `): DS (trim, collapse
  whitespace), DG (a digits-only token becomes ` + "`<*>`" + `), WV (a token containing
  ` + "`<*>`" + ` becomes ` + "`<*>`" + `), DV (` + "`<*>.<*>`" + ` → ` + "`<*>`" + `), CV (` + "`<*><*>`" + ` → ` + "`<*>`" + `),
  with its token delimiters. Its ad-hoc substitutions that follow
  (` + "`<*>:<*>`" + ` → ` + "`<*>`" + ` and similar) are not applied, since the corrected
  ground truth itself keeps ` + "`<*>:<*>`" + `.
* **Drain GA** is the published Loghub-2k grouping accuracy of Drain (Zhu et
  al., ICSE-SEIP 2019); it is the per-dataset floor. The command exits 1 when
  a dataset falls below it or when the average GA < 0.95 or average PA < 0.80.
  Note that Drain's figures were measured against the original Loghub-2k
  labels, ours against the corrected ones, so the comparison is indicative.

## Where accuracy is lost (as of this run)

* **Linux GA**: the labels give ` + "`session opened for user <*>`" + ` one template, but
  only three user names occur, below ` + "`variable_after`" + ` (4), so each keeps its
  own template (122 lines); and they split ` + "`user=guest`" + `/` + "`user=test`" + ` from
  ` + "`user=<*>`" + ` (with ` + "`user=root`" + `), which happens to agree with the miner here.
* **Android GA/PA**: long intent and alarm messages whose optional fields
  (` + "`act=`" + `, ` + "`bnds=`" + `) the labels treat as separate templates in some places and
  as one in others; many constant package names are parameters in the labels.
* **Held-one-out Linux and HPC**: the knobs best on the other ten sets
  (variable_after 3, or elastic_similarity 0.8) merge Linux's user names
  and HPC's state words earlier than the labels do; the defaults (4, 0.9)
  are what the plain table shows.
* **Lower-case enumeration words** (a kind of error seen on other logs, not
  here): words at one position that name different events widen into one
  parameter after ` + "`variable_after`" + ` values, unless written like constants
  (` + "`RUNNING`" + `) or both participles (` + "`started`" + `/` + "`stopping`" + `: lower-case, five
  letters or more, ending in -ed or -ing), which stay apart. That shape rule
  changes no score here. A rule on frequency alone (a position whose values
  are alphabetic words that each recur 2, 3 or 5 times stays apart) was
  tried and rejected: Linux GA 0.939 → 0.877 (PA 0.756 → 0.695), held-one-out
  average GA 0.976 → 0.970 and PA 0.880 → 0.873, because the labels make
  ` + "`session closed for user <*>`" + ` one template over four user names that each
  recur 36–43 times. Other enumerations of plain words still widen after
  ` + "`variable_after`" + ` values; a larger ` + "`variable_after`" + ` for the tenant keeps them apart.
* **Raw lines**: Proxifier groups better on raw lines (1.000) than on its
  contents, where the leading ` + "`host:port`" + ` is a lone value and not a header.
* **PA of Proxifier, Linux, Android**: the labels parameterise tokens that are
  constant in these 2,000 lines (Java class names, host names, ` + "`user=root`" + `),
  which a miner only sees as variable when they vary; and the Proxifier label
  "<*> close, <*> <*>, <*> <*>, lifetime <*>" folds words into parameters.
  Hadoop's PA was 0.741 while a Java socket address ` + "`host/10.0.0.1:9000`" + ` was one
  value before the port (476 lines of ` + "`Address change detected. Old: <*>/<*>:<*>`" + `);
  the tokenizer now splits a chunk ` + "`HOST/IPV4`" + ` at its ` + "`/`" + ` (0.980).
`
