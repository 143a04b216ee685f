package committer

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/streams"
)

// accepted is an accepted report as the arbiter keeps it until its files are
// committed to the records table.
type accepted struct {
	id        string
	streamSeq uint64
	seqs      []uint64 // sorted, unique
	files     []streams.FileInfo
}

func (a *accepted) maxSeq() uint64 { return a.seqs[len(a.seqs)-1] }

// arbiter is the pure part of the committer: it decides reports in stream
// order against the committed state and follows the PrevSeq chain of accepted
// batches. It does no I/O; the caller Stat-checks files, persists verdicts and
// writes the Delta commits.
type arbiter struct {
	hw uint64 // committed high-water: every seq <= hw is committed
	// owner maps each seq above hw that an accepted report covers (committed
	// or not) to the report's id.
	owner map[uint64]string
	// next maps a batch's Prev to the batch, for accepted batches above hw.
	next map[uint64]uint64
	// pending are accepted reports whose files are not yet in the records
	// table, in acceptance order.
	pending []*accepted
	// committed holds the ids of reports whose files are in the records
	// table: from the "quarry.report" tags when the term rebuilt its state
	// (value 0; as many as the table's files and tombstones name), and from
	// this term's commits (value: the report stream sequence of the last
	// message of the report seen). The latter are forgotten once the report
	// stream is purged past that message (purged), so a term that runs for
	// months keeps only the reports since the purge point.
	committed map[string]uint64
	// paths maps "<table>/<path>" of every accepted file (committed or not)
	// to its report id.
	paths map[string]string
	// verdicts holds this term's verdicts of reports not yet committed, so a
	// republished report gets the same verdict without a look-up.
	verdicts map[string]streams.Verdict
	maxSeqOf map[string]uint64 // report id -> highest seq, for pruning verdicts
	// seen is the processed report stream, for the purge point: stream seq
	// and the highest batch seq of each message (0: nothing needed).
	seen      []seenMsg
	trackSeen bool // keep seen (only needed to purge the report stream)
	// layout is the records table's (from its Delta metadata): a records
	// file's partition values must be its partition columns.
	layout lake.Layout
}

type seenMsg struct{ streamSeq, maxSeq uint64 }

func newArbiter(hw uint64) *arbiter {
	return &arbiter{
		hw:        hw,
		trackSeen: true,
		owner:     map[uint64]string{},
		next:      map[uint64]uint64{},
		committed: map[string]uint64{},
		paths:     map[string]string{},
		verdicts:  map[string]streams.Verdict{},
		maxSeqOf:  map[string]uint64{},
	}
}

// loadCommitted records a committed file of the Delta log: its report id and
// the seqs the report covered, from the add's tags.
func (a *arbiter) loadCommitted(table, filePath, reportID string, seqs []uint64) {
	a.paths[table+"/"+filePath] = reportID
	if reportID == "" {
		return
	}
	a.markCommitted(reportID)
	for _, s := range seqs {
		if s > a.hw {
			a.owner[s] = reportID
		}
	}
}

// loadCommittedPath records a file present in a table that the records table
// may not have yet (the templates table after a crash between the commits).
func (a *arbiter) loadCommittedPath(table, filePath, reportID string) {
	if _, ok := a.paths[table+"/"+filePath]; !ok {
		a.paths[table+"/"+filePath] = reportID
	}
}

// decision is the arbiter's answer before storage checks.
type decision struct {
	verdict streams.Verdict
	// final: the verdict needs no Stat (rejected, known or committed).
	final bool
	// known: a verdict this term already gave for the report id.
	known bool
}

// decide applies the ownership rule to r. When the result is not final, the
// caller Stat-checks r.Files and calls reject or keeps the acceptance.
func (a *arbiter) decide(r *streams.Report) decision {
	if v, ok := a.verdicts[r.ID]; ok {
		return decision{verdict: v, final: true, known: true}
	}
	if _, ok := a.committed[r.ID]; ok {
		return decision{verdict: streams.Verdict{ReportID: r.ID, Accepted: true}, final: true}
	}
	var reasons []string
	var dups []uint64
	seen := map[uint64]bool{}
	for _, b := range r.Batches {
		if seen[b.Seq] {
			reasons = append(reasons, fmt.Sprintf("batch %d listed twice", b.Seq))
			continue
		}
		seen[b.Seq] = true
		if b.Seq <= a.hw {
			dups = append(dups, b.Seq)
		} else if o, ok := a.owner[b.Seq]; ok && o != r.ID {
			dups = append(dups, b.Seq)
		}
	}
	slices.Sort(dups)
	if len(dups) > 0 {
		reasons = append(reasons, fmt.Sprintf("batches %s are committed or owned by an earlier report", formatSeqs(dups)))
	}
	seenPath := map[string]bool{}
	for _, f := range r.Files {
		key := f.Table + "/" + f.Path
		switch {
		case seenPath[key]:
			reasons = append(reasons, fmt.Sprintf("file %s listed twice", key))
		case !cleanRelPath(f.Path):
			reasons = append(reasons, fmt.Sprintf("file path %q is not a clean relative path outside the log", f.Path))
		case f.Table == streams.TableRecords:
			if err := a.layout.CheckPartitionValues(f.PartitionValues); err != nil {
				reasons = append(reasons, fmt.Sprintf("records file %s: %v", f.Path, err))
			} else if !strings.HasPrefix(f.Path, lake.FilePart(f.PartitionValues).FilePath("")+"/") {
				reasons = append(reasons, fmt.Sprintf("records file %s is not in the directory of its partition", f.Path))
			}
		}
		seenPath[key] = true
		if o, ok := a.paths[key]; ok && o != r.ID {
			reasons = append(reasons, fmt.Sprintf("file %s belongs to accepted report %s", key, o))
		}
	}
	if len(reasons) > 0 {
		return decision{verdict: streams.Verdict{ReportID: r.ID, Duplicates: dups, Reason: strings.Join(reasons, "; ")}, final: true}
	}
	return decision{verdict: streams.Verdict{ReportID: r.ID, Accepted: true}}
}

// cleanRelPath: p is a valid store key below a table root and not hidden
// from Delta readers (no element starting with '_' or '.', so never the log).
func cleanRelPath(p string) bool {
	if objstore.ValidateKey("t/"+p) != nil {
		return false
	}
	for el := range strings.SplitSeq(p, "/") {
		if strings.HasPrefix(el, "_") || strings.HasPrefix(el, ".") {
			return false
		}
	}
	return true
}

// errConflict: an accepted verdict (persisted earlier) covers a batch that the
// current state says is committed or owned by another report. It can only
// follow lost or expired verdicts; the report is kept out of the lake.
var errConflict = errors.New("accepted verdict conflicts with committed or owned batches")

// apply records the effect of verdict v on r, whether decided now or adopted
// from the verdicts bucket. It returns errConflict (and changes nothing) when
// an accepted verdict cannot take ownership of its batches.
func (a *arbiter) apply(r *streams.Report, streamSeq uint64, v streams.Verdict) error {
	if _, ok := a.verdicts[r.ID]; ok {
		return nil // republished: already applied
	}
	maxSeq := uint64(0)
	for _, b := range r.Batches {
		maxSeq = max(maxSeq, b.Seq)
	}
	if !v.Accepted {
		a.verdicts[r.ID] = v
		a.maxSeqOf[r.ID] = maxSeq
		return nil
	}
	at, committed := a.committed[r.ID]
	if committed && at != 0 {
		a.committed[r.ID] = max(at, streamSeq) // a later copy of the report
	}
	if !committed {
		var bad []uint64
		for _, b := range r.Batches {
			if b.Seq <= a.hw {
				bad = append(bad, b.Seq)
			} else if o, ok := a.owner[b.Seq]; ok && o != r.ID {
				bad = append(bad, b.Seq)
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("%w: report %s: batches %s", errConflict, r.ID, formatSeqs(bad))
		}
	}
	acc := &accepted{id: r.ID, streamSeq: streamSeq, files: r.Files}
	for _, b := range r.Batches {
		if b.Seq <= a.hw {
			continue // committed report partly below the high-water
		}
		a.owner[b.Seq] = r.ID
		if _, ok := a.next[b.Prev]; !ok {
			a.next[b.Prev] = b.Seq
		}
		acc.seqs = append(acc.seqs, b.Seq)
	}
	for _, f := range r.Files {
		a.paths[f.Table+"/"+f.Path] = r.ID
	}
	if committed {
		return nil
	}
	slices.Sort(acc.seqs)
	acc.seqs = slices.Compact(acc.seqs)
	if len(acc.seqs) == 0 {
		return nil
	}
	a.verdicts[r.ID] = v
	a.maxSeqOf[r.ID] = maxSeq
	a.pending = append(a.pending, acc)
	return nil
}

// track records that the report stream message streamSeq was processed and
// needs to be kept until the high-water reaches maxSeq (0: not needed).
func (a *arbiter) track(streamSeq, maxSeq uint64) {
	if !a.trackSeen {
		return
	}
	a.seen = append(a.seen, seenMsg{streamSeq, maxSeq})
}

// purgeBefore is the report stream sequence below which every processed
// message is fully at or below the high-water (0: nothing to purge).
func (a *arbiter) purgeBefore() uint64 {
	i := 0
	for i < len(a.seen) && a.seen[i].maxSeq <= a.hw {
		i++
	}
	if i == 0 {
		return 0
	}
	if i < len(a.seen) {
		return a.seen[i].streamSeq
	}
	return a.seen[i-1].streamSeq + 1
}

// purged forgets processed messages below streamSeq, and the reports this
// term committed whose messages all lay below it (with their files' paths):
// the stream no longer holds them. A copy of such a report published later
// (an encoder's publish retry whose first attempt had landed) finds its
// verdict stored and is dead-lettered if it conflicts; its files stay
// committed.
func (a *arbiter) purged(streamSeq uint64) {
	i := 0
	for i < len(a.seen) && a.seen[i].streamSeq < streamSeq {
		i++
	}
	a.seen = slices.Delete(a.seen, 0, i)
	dropped := map[string]bool{}
	for id, at := range a.committed {
		if at != 0 && at < streamSeq {
			delete(a.committed, id)
			dropped[id] = true
		}
	}
	if len(dropped) == 0 {
		return
	}
	for p, id := range a.paths {
		if dropped[id] {
			delete(a.paths, p)
		}
	}
}

// markCommitted records a report found committed in the Delta log.
func (a *arbiter) markCommitted(id string) {
	if _, ok := a.committed[id]; !ok {
		a.committed[id] = 0
	}
}

// advance follows the chain of accepted batches from the high-water and
// returns where it ends (hw when the next batch is missing).
func (a *arbiter) advance() uint64 {
	w := a.hw
	for {
		n, ok := a.next[w]
		if !ok {
			return w
		}
		w = n
	}
}

// gap describes what the barrier waits for: the lowest pending batch above
// the high-water and its Prev. ok is false when nothing waits.
func (a *arbiter) gap() (lowest, prev uint64, ok bool) {
	if a.advance() != a.hw || len(a.owner) == 0 {
		return 0, 0, false
	}
	lowest = ^uint64(0)
	for s := range a.owner {
		lowest = min(lowest, s)
	}
	for p, s := range a.next {
		if s == lowest {
			prev = p
		}
	}
	return lowest, prev, true
}

// pendingBatches counts accepted batches above the high-water.
func (a *arbiter) pendingBatches() int { return len(a.owner) }

// commitSet is every accepted report not yet in the records table.
func (a *arbiter) commitSet() []*accepted { return slices.Clone(a.pending) }

// committedUpTo records a records-table commit of reps with high-water w.
func (a *arbiter) committedUpTo(w uint64, reps []*accepted) {
	done := map[string]bool{}
	for _, r := range reps {
		done[r.id] = true
		a.committed[r.id] = max(a.committed[r.id], r.streamSeq)
		delete(a.verdicts, r.id)
		delete(a.maxSeqOf, r.id)
	}
	a.pending = slices.DeleteFunc(a.pending, func(r *accepted) bool { return done[r.id] })
	if w <= a.hw {
		return
	}
	for s := a.hw; s != w; {
		n := a.next[s]
		delete(a.next, s)
		s = n
	}
	a.hw = w
	for s := range a.owner {
		if s <= w {
			delete(a.owner, s)
		}
	}
	for p := range a.next {
		if p < w {
			delete(a.next, p) // links from below the high-water lead nowhere new
		}
	}
	for id, m := range a.maxSeqOf {
		if v := a.verdicts[id]; !v.Accepted && m <= w {
			delete(a.verdicts, id)
			delete(a.maxSeqOf, id)
		}
	}
}
