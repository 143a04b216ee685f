package subscribe

import (
	"slices"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/streams"
)

// The release rule. The committer commits an accepted report's files at
// once, also when they lie above the high-water (another encoder has not
// reported an earlier batch yet), and each commit's txn carries the
// high-water: every WAL sequence at or below it is in a file committed at
// or before that commit. So a record is released (delivered) by the first
// commit whose high-water covers its WAL sequence, never earlier: then
// every record of its tenant with a lower sequence is committed too, and
// was released by the same commit or an earlier one. Between commits the
// subscriber holds the files with rows above the high-water (a pool); each
// commit releases, per tenant, the rows with sequences in (previous
// high-water, new high-water] of the held files and the files it adds,
// merged in (wal_seq, record_index) order. Which rows a commit releases
// depends on the log alone, so a subscription resumed from a cursor
// rebuilds the same pool from the table as of the version before
// (poolAt) and releases the same rows in the same order.

// heldFile is a committed records file with rows not released yet.
type heldFile struct {
	f    streams.NoticeFile
	seqs streams.Seqs
	// since is a version at which the file was in the table: a commit
	// that removed it (compaction, retention) comes after it.
	since int64
}

// pool is the subscriber's state between two commits: the high-water of
// the last commit released and the files with rows above it.
type pool struct {
	hw   uint64
	held []heldFile
}

// poolAt is the pool after the commit at snap's version: its high-water
// and the live files whose WAL sequences reach above it. Files without
// WAL sequences were released whole by the commit that added them.
func poolAt(snap *delta.Snapshot) pool {
	var p pool
	if w, ok := snap.Txns[lake.AppID]; ok && w > 0 {
		p.hw = uint64(w)
	}
	for _, a := range snap.Files {
		f := lake.AddNotice(a)
		seqs, err := streams.ParseSeqs(f.WAL)
		if err == nil && seqs.Top() > p.hw {
			p.held = append(p.held, heldFile{f: f, seqs: seqs, since: snap.Version})
		}
	}
	return p
}

// holds reports whether path is a held file of p.
func (p pool) holds(path string) bool {
	return slices.ContainsFunc(p.held, func(h heldFile) bool { return h.f.Path == path })
}

// part is one file's share of a release: its rows with WAL sequences in
// (lo, hi], or every row when all (a file without WAL sequences).
type part struct {
	heldFile
	lo, hi uint64
	all    bool
}

// keep reports whether the part releases a row of sequence seq.
func (p part) keep(seq uint64) bool { return p.all || (seq > p.lo && seq <= p.hi) }

// release is what one commit delivers: for each tenant (in name order) the
// parts of its files, and the pool after the commit.
type release struct {
	version int64
	tenants []string
	parts   map[string][]part
	next    pool
}

// release applies commit n to p: it returns the rows n releases, and the
// pool after n. It does no I/O.
func (p pool) release(n *streams.Notice) *release {
	hw := max(p.hw, n.HighWater) // a commit without txn (compaction) keeps it
	r := &release{version: n.Version, parts: map[string][]part{}, next: pool{hw: hw}}
	take := func(h heldFile, lo uint64) {
		if h.seqs.Within(lo, hw) {
			r.parts[h.f.Tenant] = append(r.parts[h.f.Tenant], part{heldFile: h, lo: lo, hi: hw})
		}
		if h.seqs.Top() > hw {
			r.next.held = append(r.next.held, h)
		}
	}
	for _, h := range p.held {
		take(h, p.hw) // rows up to p.hw were released before
	}
	for _, a := range n.Adds {
		if !a.DataChange {
			continue // a compaction's rewrite: rows released from the original files
		}
		seqs, err := streams.ParseSeqs(a.WAL)
		h := heldFile{f: a, seqs: seqs, since: n.Version}
		if err != nil || len(seqs) == 0 {
			// Unknown WAL sequences (a file committed before the tag
			// existed): released whole, by the commit that adds it.
			r.parts[a.Tenant] = append(r.parts[a.Tenant], part{heldFile: h, all: true})
			continue
		}
		// From 0: a new file's rows at or below p.hw cannot exist while
		// the committer keeps its high-water invariant; should one, it is
		// delivered now rather than never.
		take(h, 0)
	}
	for t := range r.parts {
		r.tenants = append(r.tenants, t)
	}
	slices.Sort(r.tenants)
	return r
}
