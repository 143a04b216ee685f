package main

// Leave-one-dataset-out evaluation and raw-line scoring.
//
// The miner has a few generic knobs (mining.Config: Similarity,
// VariableAfter, ElasticSimilarity). Reporting the accuracy of the
// defaults on the very datasets they were chosen on overstates how well
// they carry to logs never seen. LOO picks, for each dataset in turn, the
// grid point that scores best on the other datasets and reports the held
// dataset's score at that point; its average is the figure a change must
// not lower.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/quarrylake/quarry/internal/mining"
)

// Grid returns the knob settings LOO chooses from; the base configuration
// is first so that ties keep it.
func Grid(base mining.Config) []mining.Config {
	out := []mining.Config{base}
	for _, sim := range []float64{0.4, 0.5, 0.6, 0.7} {
		for _, va := range []int{3, 4, 5, 6} {
			for _, es := range []float64{0.8, 0.9, 2} {
				c := base
				c.Similarity, c.VariableAfter, c.ElasticSimilarity = sim, va, es
				if !sameKnobs(c, base) {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// sameKnobs reports whether a and b have the same tunable knobs.
func sameKnobs(a, b mining.Config) bool {
	return a.Similarity == b.Similarity && a.VariableAfter == b.VariableAfter && a.ElasticSimilarity == b.ElasticSimilarity
}

// LOORow is the held-one-out result of one dataset.
type LOORow struct {
	Dataset string
	Chosen  mining.Config
	Scores  Scores
}

// LeaveOneOut scores every configuration of grid on every dataset, then for
// each dataset chooses the configuration with the best mean GA + PA over the
// other datasets (earliest on ties) and reports that configuration's scores
// on the held dataset.
func LeaveOneOut(ds []*Dataset, grid []mining.Config) ([]LOORow, error) {
	scores := make([][]Scores, len(grid)) // [config][dataset]
	for ci, c := range grid {
		scores[ci] = make([]Scores, len(ds))
		for di, d := range ds {
			p, err := Mine(c, d)
			if err != nil {
				return nil, err
			}
			scores[ci][di] = Score(d, p)
		}
	}
	rows := make([]LOORow, len(ds))
	for held := range ds {
		best, bestV := 0, -1.0
		for ci := range grid {
			v := 0.0
			for di := range ds {
				if di != held {
					v += scores[ci][di].GA + scores[ci][di].PA
				}
			}
			if v > bestV+1e-12 {
				best, bestV = ci, v
			}
		}
		rows[held] = LOORow{Dataset: ds[held].Name, Chosen: grid[best], Scores: scores[best][held]}
	}
	return rows, nil
}

// LOOReport formats held-one-out rows beside the plain scores (same order).
func LOOReport(plain []Scores, loo []LOORow) (string, float64, float64) {
	var b strings.Builder
	b.WriteString("| Dataset | GA | PA | held-one-out GA | held-one-out PA | chosen on the other sets (similarity, variable_after, elastic_similarity) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|\n")
	var ga, pa, lga, lpa float64
	for i, r := range loo {
		s := plain[i]
		fmt.Fprintf(&b, "| %s | %.3f | %.3f | %.3f | %.3f | %.1f, %d, %.1f |\n", r.Dataset, s.GA, s.PA, r.Scores.GA, r.Scores.PA,
			r.Chosen.Similarity, r.Chosen.VariableAfter, r.Chosen.ElasticSimilarity)
		ga += s.GA
		pa += s.PA
		lga += r.Scores.GA
		lpa += r.Scores.PA
	}
	n := float64(len(loo))
	if n > 0 {
		lga, lpa = lga/n, lpa/n
		fmt.Fprintf(&b, "| **Average** | **%.3f** | **%.3f** | **%.3f** | **%.3f** | |\n", ga/n, pa/n, lga, lpa)
	}
	return b.String(), lga, lpa
}

// LoadRaw reads the raw lines of dataset name (D/D_2k.log, headers and all)
// and pairs them with the ground truth of d, line by line.
func LoadRaw(dir string, d *Dataset) (*Dataset, error) {
	path := filepath.Join(dir, d.Name, d.Name+"_2k.log")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load raw %s: %w", d.Name, err)
	}
	defer f.Close()
	raw := &Dataset{Name: d.Name, Templates: d.Templates}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		raw.Content = append(raw.Content, strings.TrimSuffix(sc.Text(), "\r"))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("load raw %s: %w", path, err)
	}
	if len(raw.Content) != len(d.Content) {
		return nil, fmt.Errorf("load raw %s: %d lines, ground truth has %d", path, len(raw.Content), len(d.Content))
	}
	return raw, nil
}

// RawRow compares grouping on raw lines with grouping on contents.
type RawRow struct {
	Dataset          string
	ContentGA, RawGA float64
	ContentFGA       float64
	RawFGA           float64
}

// RawReport formats raw-line rows and returns the sets where the header
// costs more than maxCost GA.
func RawReport(rows []RawRow, maxCost float64) (string, []string) {
	var b strings.Builder
	var fails []string
	b.WriteString("| Dataset | content GA | raw-line GA | content FGA | raw-line FGA |\n|---|---:|---:|---:|---:|\n")
	var cga, rga, cf, rf float64
	for _, r := range rows {
		mark := ""
		if r.ContentGA-r.RawGA > maxCost+1e-9 {
			mark = " ✗"
			fails = append(fails, fmt.Sprintf("%s raw-line GA %.3f < content GA %.3f - %.2f", r.Dataset, r.RawGA, r.ContentGA, maxCost))
		}
		fmt.Fprintf(&b, "| %s | %.3f | %.3f%s | %.3f | %.3f |\n", r.Dataset, r.ContentGA, r.RawGA, mark, r.ContentFGA, r.RawFGA)
		cga += r.ContentGA
		rga += r.RawGA
		cf += r.ContentFGA
		rf += r.RawFGA
	}
	if n := float64(len(rows)); n > 0 {
		fmt.Fprintf(&b, "| **Average** | **%.3f** | **%.3f** | **%.3f** | **%.3f** |\n", cga/n, rga/n, cf/n, rf/n)
	}
	return b.String(), fails
}

// Summary is the one-line form of the averages printed by -summary:
// plain GA and PA, held-one-out GA and PA, raw-line GA.
func Summary(plain []Scores, looGA, looPA float64, raws []RawRow) string {
	var ga, pa, rga float64
	for _, s := range plain {
		ga += s.GA
		pa += s.PA
	}
	for _, r := range raws {
		rga += r.RawGA
	}
	if n := float64(len(plain)); n > 0 {
		ga, pa = ga/n, pa/n
	}
	if n := float64(len(raws)); n > 0 {
		rga /= n
	}
	return fmt.Sprintf("ga=%.3f pa=%.3f loo_ga=%.3f loo_pa=%.3f raw_ga=%.3f", ga, pa, looGA, looPA, rga)
}
