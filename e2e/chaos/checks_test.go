//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/internal/objstore"
)

// inputLine is one line the producers were given, in WAL order: the
// tenants are fed one after the other through one ordered path, so the WAL
// holds the input in exactly this order whatever the faults.
type inputLine struct {
	tenant, line string
}

// checkLake checks the lake against the input with nothing but the lake:
//
//  1. the records table holds each input line exactly once (multiset of
//     (tenant, line));
//  2. records sorted by (wal_seq, record_index) are the input in order (the
//     producers fed the tenants sequentially, so this is what the WAL held);
//  3. every record's (template_id, template_version, params) equals what a
//     fresh internal/mining Model gives for the input in that order: the ids
//     of a fault-free run;
//  4. the high-water (txn "quarry") never goes backwards along either
//     table's log, the templates table never ends behind records, and the
//     lease revision in commitInfo never goes down (no fenced writer);
//  5. delta.ValidateLog passes for both tables (every version present and
//     well formed, no file added twice, every active file present with its
//     size);
//  6. every path the logs reference is a clean relative path inside its
//     table (records: inside its tenant= or tenant=/date= partition).
func checkLake(ctx context.Context, store objstore.Store, input []inputLine) []error {
	var errs []error
	lk := lake.Open(store)
	var recs []lake.Record
	if err := lk.Query(ctx, lake.Filter{}, func(r lake.Record) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		return []error{fmt.Errorf("query: %w", err)}
	}

	// 1. multiset equality.
	count := map[inputLine]int{}
	for _, in := range input {
		count[in]++
	}
	for _, r := range recs {
		count[inputLine{r.Tenant, r.Line}]--
	}
	var missing, extra int
	var examples []string
	for k, n := range count {
		switch {
		case n > 0:
			missing += n
		case n < 0:
			extra += -n
		default:
			continue
		}
		if len(examples) < 5 {
			examples = append(examples, fmt.Sprintf("%s %q x%+d", k.tenant, k.line, -n))
		}
	}
	if missing > 0 || extra > 0 {
		sort.Strings(examples)
		errs = append(errs, fmt.Errorf("exactly once: lake holds %d records for %d input lines: %d missing, %d extra (e.g. %s)",
			len(recs), len(input), missing, extra, strings.Join(examples, "; ")))
	}

	// 2 and 3. WAL order and template ids.
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].WALSeq != recs[j].WALSeq {
			return recs[i].WALSeq < recs[j].WALSeq
		}
		return recs[i].Index < recs[j].Index
	})
	if len(errs) == 0 {
		for i, r := range recs {
			if r.Tenant != input[i].tenant || r.Line != input[i].line {
				errs = append(errs, fmt.Errorf("wal order: record %d (wal_seq %d, index %d) is %s %q, input has %s %q",
					i, r.WALSeq, r.Index, r.Tenant, r.Line, input[i].tenant, input[i].line))
				break
			}
		}
	}
	model, err := mining.New(mining.Config{})
	if err != nil {
		return append(errs, err)
	}
	bad := 0
	for _, r := range recs {
		res, _ := model.Mine(r.Tenant, r.Line, nil)
		if res.ID != r.TemplateID || res.Version != r.TemplateVersion || strings.Join(res.Params, "\x00") != strings.Join(r.Params, "\x00") {
			if bad < 3 {
				errs = append(errs, fmt.Errorf("template ids: wal_seq %d index %d %q is template %d v%d params %q, a fault-free run gives %d v%d %q",
					r.WALSeq, r.Index, r.Line, r.TemplateID, r.TemplateVersion, r.Params, res.ID, res.Version, res.Params))
			}
			bad++
		}
	}
	if bad > 3 {
		errs = append(errs, fmt.Errorf("template ids: %d records differ from a fault-free run", bad))
	}

	// 4, 5, 6. The Delta logs.
	txns := map[string]int64{}
	for _, table := range []string{lake.RecordsTable, lake.TemplatesTable, lake.ProgressTable} {
		if err := delta.ValidateLog(ctx, store, table); err != nil {
			errs = append(errs, fmt.Errorf("delta log %s: %w", table, err))
		}
		last, err := checkVersions(ctx, store, table)
		if err != nil {
			errs = append(errs, err)
		}
		txns[table] = last
	}
	if txns[lake.TemplatesTable] < txns[lake.RecordsTable] {
		errs = append(errs, fmt.Errorf("high-water: templates txn %d behind records txn %d", txns[lake.TemplatesTable], txns[lake.RecordsTable]))
	}
	return errs
}

// checkVersions walks every version of table: txn(quarry) never decreases
// and every referenced path is clean and inside the table. It returns the
// last txn version.
func checkVersions(ctx context.Context, store objstore.Store, table string) (int64, error) {
	t := delta.OpenTable(store, table)
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return -1, fmt.Errorf("snapshot %s: %w", table, err)
	}
	var errs []error
	txn := int64(-1)
	leaseRev := float64(0)
	for v := int64(0); v <= snap.Version; v++ {
		b, err := store.Get(ctx, t.CommitKey(v))
		if errors.Is(err, objstore.ErrNotFound) {
			continue // below a checkpoint; ValidateLog reports real gaps
		}
		if err != nil {
			return txn, fmt.Errorf("%s version %d: %w", table, v, err)
		}
		actions, err := delta.DecodeCommit(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s version %d: %w", table, v, err))
			continue
		}
		for _, a := range actions {
			if a.CommitInfo != nil {
				// Fencing: a term's lease revision is above every earlier
				// term's, so a version written by a committer that lost its
				// lease would show a revision going down.
				if q, ok := a.CommitInfo["quarry"].(map[string]any); ok {
					if rev, ok := q["lease_revision"].(float64); ok {
						if rev < leaseRev {
							errs = append(errs, fmt.Errorf("fencing: %s version %d written by %v under lease revision %.0f after revision %.0f",
								table, v, q["committer"], rev, leaseRev))
						}
						leaseRev = max(leaseRev, rev)
					}
				}
			}
			if a.Txn != nil && a.Txn.AppID == lake.AppID {
				if a.Txn.Version < txn {
					errs = append(errs, fmt.Errorf("high-water went backwards in %s version %d: %d after %d", table, v, a.Txn.Version, txn))
				}
				txn = a.Txn.Version
			}
			if a.Add != nil {
				if err := checkPath(table, a.Add.Path, a.Add.PartitionValues); err != nil {
					errs = append(errs, fmt.Errorf("%s version %d: %w", table, v, err))
				}
			}
		}
	}
	return txn, errors.Join(errs...)
}

func checkPath(table, p string, pv map[string]string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "://") || path.Clean(p) != p || strings.HasPrefix(p, "..") || strings.HasPrefix(p, "_") || strings.HasPrefix(p, ".") {
		return fmt.Errorf("add path %q is outside the table", p)
	}
	if table == lake.RecordsTable {
		// Partitioned by tenant (tables created since issue 10) or by
		// tenant and date (before).
		want := fmt.Sprintf("tenant=%s/", pv["tenant"])
		if d, ok := pv["date"]; ok {
			want += fmt.Sprintf("date=%s/", d)
		}
		if !strings.HasPrefix(p, want) || strings.Contains(strings.TrimPrefix(p, want), "/") {
			return fmt.Errorf("add path %q is outside its partition %s", p, want)
		}
	}
	return nil
}

// dataFiles lists the data files (not the log) of both tables and which of
// them the logs reference.
func dataFiles(ctx context.Context, store objstore.Store) (all []string, refs map[string]bool, err error) {
	refs = map[string]bool{}
	// Vacuum cleans the progress table too: a committer killed between
	// writing a progress file and committing it leaves an orphan there
	// (left out, it made "N before, N+1 deleted" a rare false failure).
	for _, table := range []string{lake.RecordsTable, lake.TemplatesTable, lake.ProgressTable} {
		infos, err := store.List(ctx, table+"/")
		if err != nil {
			return nil, nil, err
		}
		for _, in := range infos {
			if strings.Contains(in.Key, "/_delta_log/") {
				continue
			}
			all = append(all, in.Key)
		}
		r, err := delta.OpenTable(store, table).ReferencedFiles(ctx)
		if err != nil {
			return nil, nil, err
		}
		for p := range r {
			refs[table+"/"+p] = true
		}
	}
	return all, refs, nil
}

// checkVacuum runs `quarry vacuum --retention 0s` and checks it deleted only
// unreferenced files, and all of them. It returns how many it deleted.
func checkVacuum(ctx context.Context, bin, lakeDir string, store objstore.Store) (int, []error) {
	before, refs, err := dataFiles(ctx, store)
	if err != nil {
		return 0, []error{fmt.Errorf("list before vacuum: %w", err)}
	}
	// Only stdout lists deleted keys; a log line on stderr is not one.
	cmd := exec.CommandContext(ctx, bin, "vacuum", "--lake", lakeDir, "--retention", "0s")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, []error{fmt.Errorf("vacuum: %v\n%s%s", err, out, stderr.String())}
	}
	var errs []error
	deleted := strings.Fields(string(out))
	for _, k := range deleted {
		if refs[k] {
			errs = append(errs, fmt.Errorf("vacuum deleted %s, which the log references", k))
		}
	}
	after, _, err := dataFiles(ctx, store)
	if err != nil {
		return len(deleted), append(errs, fmt.Errorf("list after vacuum: %w", err))
	}
	for _, k := range after {
		if !refs[k] {
			errs = append(errs, fmt.Errorf("vacuum left the unreferenced file %s", k))
		}
	}
	if len(before)-len(deleted) != len(after) {
		errs = append(errs, fmt.Errorf("vacuum: %d files before, %d deleted, %d after", len(before), len(deleted), len(after)))
	}
	return len(deleted), errs
}

// checkCompact runs `quarry compact` by hand once every committer stopped
// (retrying while a killed one's lease lapses) and returns how many files
// it compacted; the caller checks the lake again.
func checkCompact(ctx context.Context, bin, lakeDir, url, cfgFile string) (int, []error) {
	for attempt := 0; ; attempt++ {
		cmd := exec.CommandContext(ctx, bin, "compact", "--lake", lakeDir, "--nats", url, "--config", cfgFile)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err == nil {
			var parts, removed, written int
			if _, serr := fmt.Sscanf(string(out), "compacted %d partitions: %d files into %d", &parts, &removed, &written); serr != nil {
				return 0, []error{fmt.Errorf("quarry compact printed %q: %v", out, serr)}
			}
			return removed, nil
		}
		if !strings.Contains(stderr.String(), "lease is held") || attempt >= 10 {
			return 0, []error{fmt.Errorf("quarry compact: %v\n%s%s", err, out, stderr.String())}
		}
		select {
		case <-ctx.Done():
			return 0, []error{ctx.Err()}
		case <-time.After(time.Second):
		}
	}
}
