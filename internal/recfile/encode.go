package recfile

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"

	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/streams"
)

// Wildcard marks a parameter in a template's text.
const Wildcard = "<*>"

// ErrInput marks rows Encode cannot write: a template it was not given, or
// a parameter count that does not match the template.
var ErrInput = errors.New("recfile: bad input")

// Key names one template version.
type Key struct {
	ID      uint64
	Version uint32
}

// Templates holds the template texts records refer to.
type Templates map[Key]string

// Row is one record to write: a mined record with its WAL position and
// source.
type Row struct {
	WALSeq          uint64
	Index           uint32
	TS              int64 // nanoseconds since the epoch; stored as microseconds
	TSSource        streams.TSSource
	TemplateID      uint64
	TemplateVersion uint32
	Params          []string
	Source          string
	Attrs           []streams.Attr
}

// AppendBatch appends the records of b to dst.
func AppendBatch(dst []Row, b *streams.MinedBatch) []Row {
	for i := range b.Records {
		r := &b.Records[i]
		dst = append(dst, Row{WALSeq: b.WALSeq, Index: r.Index, TS: r.TS, TSSource: r.TSSource, TemplateID: r.TemplateID,
			TemplateVersion: r.TemplateVersion, Params: r.Params, Source: b.Source, Attrs: r.Attrs})
	}
	return dst
}

// File is an encoded records data file.
type File struct {
	Data  []byte
	Stats string // Delta add-action stats JSON
	Rows  int
}

// Encode writes rows as one records v3 Parquet file, rows ordered by
// template and, within a template, by WAL position. The rows' templates
// must be in tpl.
func Encode(rows []Row, tpl Templates, opts ...Option) (File, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	return encode(rows, tpl, &o)
}

// Option changes what Encode writes.
type Option func(*options)

// WithDate adds (on) the date column: each row's UTC day of ts, a Parquet
// INT32 DATE, DELTA_BINARY_PACKED, and its bounds in the stats. A records
// table partitioned by tenant only (lake.Layout) has date as a data
// column; one partitioned by (tenant, date) has it in the partition values
// and its files go without. Decode reads files with and without it.
func WithDate(on bool) Option { return func(o *options) { o.date = on } }

// WithHighCompression (on) compresses every compressed column with zstd's
// best level or its default, whichever frame is smaller (a few KB can come
// out larger at best): on the Loghub datasets 7-9% fewer records bytes
// for 2.6 times the encode CPU (TestSizeLoghub "high", TestSizeLevers,
// TestEncodeLevelsCPU). For files written once and kept, off the ingest
// path: compaction and retention's rewrites. The file's layout is the
// same; only its column chunks' compression differs, and any zstd decoder
// reads them.
func WithHighCompression(on bool) Option {
	return func(o *options) {
		o.hiLevel, o.hiBytes = 0, 0
		if on {
			o.hiLevel = zstd.SpeedBestCompression
		}
	}
}

// tplInfo is a template text cut at its wildcards.
type tplInfo struct {
	pieces []string // len = wildcards + 1
	// rows and seen are the file's summary of this version (summary),
	// gathered by classify while the row's parameters are in cache: a
	// pass of its own walked every row again in template order, a cache
	// miss for each row and parameter of a large file.
	rows int64
	seen [256]bool
	// pairs is seen's pairs of adjacent bytes, in a file of several row
	// groups at zstd's best level (encoder.gatherPairs; nil otherwise):
	// PairsKey.
	pairs *pairSeen
	// kinds is the kinds of the version's last row classified (interned
	// in encoder.kinds).
	kinds string
	// split, when not nil, says which parameters are split at their digit
	// runs (pickSplits); nil: all, when the encoder splits.
	split []bool
	// shift is, per parameter, what shift found: a layout id (> 0) or
	// minus the probes that found no time (at most shiftProbes).
	shift []int8
	// inner is the other times innerShifts found in the row before, in
	// the parameter that holds the timestamp; innerProbes is 1 once it
	// found some, else minus the rows it found none in (at most
	// shiftProbes).
	inner       []innerShift
	innerProbes int8
}

// encoded is the per-row result of classification: the row's values per
// slot kind, the k-th of each kind going to column p<k>, n<k> or b<k>.
type encoded struct {
	kinds   string
	residue []byte
	s, n, b span // the row's string, number and bytes values in encoder.sidx, nv, bidx
	m       span // the row's parameters in more, in encoder.midx
	d       span // the row's d items, in encoder.dits
}

// dItem is a parameter split at its digit runs (kind d or v): its index, its
// place among the row's string values (numbered from the left) and how
// many runs it has, in the n columns after the row's numeric parameters.
type dItem struct {
	j    int32
	s    int32
	runs int8
	text string // its text in more (v: without the timestamp)
}

// span is a range of an encoder array.
type span struct{ off, cnt int32 }

type encoder struct {
	o      *options
	tpl    Templates
	infos  map[Key]*tplInfo
	kinds  map[string]string
	parser *eventtime.Parser
	stamps *eventtime.Parser // shift's, made on its first use
	shifts []innerShift      // innerShifts' result
	span   []byte            // shift's parameters after a place
	ends   []int             // where each parameter of span ends
	nsres  []byte            // findTime's residue with the nanoseconds below ts's microsecond
	tbuf   []byte            // shift's rendering
	line   []byte
	offs   []int
	tsbuf  []byte // Render of tsMicros, tsLayout, tsRes when tsValid
	// the timestamp tsbuf holds
	tsValid  bool
	tsMicros int64
	tsLayout eventtime.LayoutID
	tsRes    []byte
	kbuf     []byte
	svals    []string          // string values
	bvals    []string          // bytes values
	sj       []int32           // parameter index of each string value
	nj       []int32           // parameter index of each number
	bj       []int32           // parameter index of each bytes value
	items    []item            // scratch: a row's items of more
	joined   []byte            // the more_text values written so far (never reused within a file: the values point into it)
	hashes   []uint64          // scratch: a row's string values' estimate bits + 1, 0 when not hashed
	rkinds   map[string]string // kinds -> "r"+kinds (alignRight)
	// split: string parameters are split at their digit runs (kind d);
	// runs is a row's runs, dits every row's d items.
	split bool
	runs  []int64
	dits  []dItem
	// picks: the parameters split (splitPicked); counts: what pickSplits
	// decides by (splitCounted); skel and skelRuns are countRuns' scratch
	// (runs is the row's).
	picks  map[Key][]bool
	counts map[Key][]runCount
	// sparse: demote saw a slot column the next sparse step (encode's
	// trial, nextSparse) would leave out and o's thresholds do not.
	sparse   bool
	skel     []byte
	skelRuns []int64

	lastKey  Key
	lastInfo *tplInfo
	ranked   []*tplInfo // by template rank (sortRanks), when the rows have ranks
	arena    []byte     // text of string values that are not parameters
	midx     []int32    // parameter index of each value in more
	nv       []int64    // numeric values
	resbuf   []byte
	vals     []parquet.Value // write's values of a batch of rows
	u        usage
	// tail is the number of rows at the end of the write order that are
	// rare template versions' (rareLast): a row group of their own.
	tail int
	// gatherPairs: classify gathers each version's byte pairs (PairsKey).
	gatherPairs bool
}

// scratch are an encode's arrays of a value per row or parameter, kept for
// the next encode: a file of 22,000 lines used about 5 MB of them, zeroed
// by each allocation and then collected.
type scratch struct {
	enc    []encoded
	arena  []byte
	svals  []string
	nv     []int64
	sj, nj []int32
	pos    []int32 // write position of each row
	vals   []parquet.Value
}

// maxScratch bounds the rows (or parameters) of arrays kept for reuse, so
// one large encode (a compaction) does not hold its arrays for good.
const maxScratch = 1 << 18

var scratchPool sync.Pool // *scratch

func getScratch() *scratch {
	if sc, ok := scratchPool.Get().(*scratch); ok {
		return sc
	}
	return &scratch{}
}

// put takes e's arrays back into sc and returns sc to the pool, cleared of
// references to the rows' text (and enc zeroed, as make would) so a kept
// array holds no frame in memory.
func (sc *scratch) put(e *encoder) {
	if cap(sc.enc) > maxScratch || cap(e.svals) > maxScratch || cap(e.vals) > maxScratch {
		return
	}
	clear(sc.enc)
	clear(e.svals)
	clear(e.vals)
	sc.arena, sc.svals, sc.nv, sc.sj, sc.nj, sc.vals = e.arena[:0], e.svals[:0], e.nv[:0], e.sj[:0], e.nj[:0], e.vals[:0]
	sc.enc, sc.pos = sc.enc[:0], sc.pos[:0]
	scratchPool.Put(sc)
}

// encode writes rows as one file. With zstd's best level (o.hiLevel) it
// writes the file more than once and keeps the smallest: with o.digits
// "trial", also with the string parameters pickSplits picks (from what the
// first write counted) split at their digit runs (kind d, v), kept when it
// is splitGain smaller; then, while some slot column is used by fewer rows
// than the next of sparseSteps (or slotRowsSparse), also with those
// columns left out (their values in more), kept while smaller; a file of
// one row group also with every slot column left out, kept if smaller,
// and last with its rows in WAL order, kept if smaller.
func encode(rows []Row, tpl Templates, o *options) (File, error) {
	if o.digits == "on" {
		f, _, err := encodeOnce(rows, tpl, o, splitAll, nil)
		return f, err
	}
	if o.hiLevel == 0 {
		f, _, err := encodeOnce(rows, tpl, o, splitNone, nil)
		return f, err
	}
	how := splitNone
	if o.digits == "trial" {
		how = splitCounted
	}
	f, w, err := encodeOnce(rows, tpl, o, how, nil)
	if err != nil {
		return f, err
	}
	how, picks := splitNone, w.picks
	if picks != nil {
		g, gw, err := encodeOnce(rows, tpl, o, splitPicked, picks)
		if err == nil && float64(len(g.Data)) <= (1-splitGain)*float64(len(f.Data)) {
			f, w, how = g, gw, splitPicked
		} // an error here would have been one in f
	}
	// Widen the sparse thresholds while it pays: each step leaves out the
	// slot columns fewer rows than it says use, if there are any.
	cur := *o
	for _, step := range sparseSteps {
		if !w.sparse {
			break
		}
		so := cur
		so.slotMin, so.slotRows = max(o.slotMin, step), max(o.slotRows, slotRowsSparse)
		g, gw, err := encodeOnce(rows, tpl, &so, how, picks)
		if err != nil || len(g.Data) >= len(f.Data) {
			break
		}
		f, w, cur = g, gw, so
	}
	// Every parameter in more, in a file of one row group that still has
	// a slot column, where that is smaller: parameters that repeat across
	// templates (one template's first slot, another's second) or slot
	// columns of a few values each compress smaller as one stream than as
	// columns, each a zstd frame of its own (docs/benchmarks.md, "Lake
	// size: every parameter in more by trial"). Files of several row
	// groups (compaction's) are left as they are: the trial costs one
	// more encode, about 15% of a best-level encode's CPU, which an idle
	// encoder's small flush spends on an idle CPU.
	oneGroup := !(cur.groupRows > 0 && len(rows) >= 2*cur.groupRows)
	var near *options // every parameter in more, where it lost by little
	if w.slots && oneGroup {
		so := cur
		so.slotMin = everyToMore
		if g, gw, err := encodeOnce(rows, tpl, &so, how, picks); err == nil && len(g.Data) < len(f.Data) {
			f, w, cur = g, gw, so
		} else if err == nil && float64(len(g.Data)) < (1+nearLoss)*float64(len(f.Data)) {
			near = &so
		}
	}
	// A file of one row group (no template ranges to skip by) in WAL
	// order, where that is smaller; so too every parameter in more where
	// it lost by little in template order: a package's name in the lines
	// apt writes for it (three templates, three columns) repeats next to
	// itself only in WAL order, and apt's term.log is smallest all in
	// more_text in WAL order, though its columns win in template order by
	// 283 bytes, 0.9% (its records 33,212 -> 31,077 bytes; TestInMoreInWALOrder).
	if cur.sortByTpl && oneGroup {
		cur.sortByTpl = false
		if g, _, err := encodeOnce(rows, tpl, &cur, how, picks); err == nil && len(g.Data) < len(f.Data) {
			f = g
		}
		if near != nil {
			near.sortByTpl = false
			if g, _, err := encodeOnce(rows, tpl, near, how, picks); err == nil && len(g.Data) < len(f.Data) {
				f = g
			}
		}
	}
	return f, nil
}

// sparseSteps are the shares of rows below which encode's trial at zstd's
// best level leaves out a slot column too (and below slotRowsSparse rows),
// tried in turn while each makes the file smaller. A slot column used by
// few rows costs its own chunk, page and footer entry and a zstd frame that
// shares no context with the others; in more, its values sit beside the
// rest. Which is smaller depends on the file (records bytes at 1/16, 1/4,
// 1/2, 3/4: Android 17,701, 15,753, 15,245, 15,245; Linux 13,585, 13,510,
// 12,724, 12,331; HPC 23,364, 23,873, 25,356), so the trial decides
// (docs/benchmarks.md, "Lake size: sparse slot columns by trial").
var sparseSteps = []float64{0.25, 0.5, 0.75}

// nearLoss: every parameter in more that lost to the columns by less than
// this share in template order is tried in WAL order too (encode). Over
// the 11 Loghub sets and this machine's apt, dpkg and docker logs two were
// that near, term.log (0.9%, and smallest so) and BGL (2.4%, not
// smaller); the others lost by 4.6% (Android) to 37% (OpenSSH), or won.
const nearLoss = 0.03

// everyToMore is a slotMin that leaves out every slot column: a share of
// the rows above 1, which no column reaches.
const everyToMore = 2.0

// slotRowsSparse: see sparseSteps.
const slotRowsSparse = 128

// onceInfo is what encodeOnce learnt besides the file: the parameters
// pickSplits picks (splitCounted; nil for none), and whether the sparse
// thresholds would leave out a slot column the file has.
type onceInfo struct {
	picks  map[Key][]bool
	sparse bool
	slots  bool // the file has a slot column (p<j>, n<j> or b<j>)
}

// splitGain is the share of a file's bytes a split at the digit runs must
// save to be kept: each run is a value a reader decodes and renders
// (the Loghub files split render 34-49% slower, docs/benchmarks.md
// "Digit runs split out of string parameters"), so a split of Linux's
// (0.8% smaller) or Hadoop's (0.3%) is not worth it, HPC's (6.5%) or
// HDFS's (5.0%) is.
const splitGain = 0.03

// What encodeOnce splits at the digit runs (kind d, v).
const (
	splitNone    = iota
	splitCounted // none, and count the string parameters' runs for pickSplits
	splitPicked  // the parameters picks says
	splitAll     // every string parameter with a run (tests)
)

// encodeOnce writes rows as one file, its string parameters split at their
// digit runs as how says. With splitCounted it returns the parameters
// pickSplits picks, nil for none.
func encodeOnce(rows []Row, tpl Templates, o *options, how int, picks map[Key][]bool) (f File, info onceInfo, err error) {
	p, err := eventtime.New(eventtime.Defaults())
	if err != nil {
		return File{}, onceInfo{}, fmt.Errorf("timestamp parser: %w", err)
	}
	e := &encoder{o: o, tpl: tpl, infos: map[Key]*tplInfo{}, kinds: map[string]string{}, parser: p,
		split: how == splitPicked || how == splitAll, picks: picks}
	if how == splitCounted {
		e.counts = map[Key][]runCount{}
	}
	order, ranks, nkeys := sortRanks(rows, o.sortByTpl)
	if o.sortByTpl && o.groupRows > 0 && len(rows) >= 2*o.groupRows {
		e.tail = rareLast(rows, order, o.rareRows)
	}
	// A file of several row groups (groupCuts) written at zstd's best
	// level (compaction's, an idle encoder's) gets PairsKey: its versions'
	// rows are many and worth skipping, where in a small file the sets
	// would cost more than the rows they let a search skip. A busy
	// encoder's files go without: gathering the pairs cost 8-9% of the
	// default level's encode CPU (BenchmarkEncodeV3) and 3% of a quarry
	// run's user CPU, and compaction rewrites those files (committer's
	// compaction, within committer.compaction.idle or the day's end).
	e.gatherPairs = o.hiLevel != 0 && o.groupRows > 0 && len(rows) >= 2*o.groupRows
	nparams, first := 0, 0
	for i := range rows {
		nparams += len(rows[i].Params)
		if len(rows[i].Params) > 0 {
			first += len(rows[i].Params[0])
		}
	}
	// Cut parameters (kind u) are mostly a line's first.
	sc := getScratch()
	defer sc.put(e)
	e.arena = slices.Grow(sc.arena[:0], first)
	e.svals = slices.Grow(sc.svals[:0], nparams)
	e.nv = slices.Grow(sc.nv[:0], nparams)
	e.sj = slices.Grow(sc.sj[:0], nparams)
	e.nj = slices.Grow(sc.nj[:0], nparams)
	e.vals = sc.vals[:0]
	// enc is in write order: enc[x] is rows[order[x]]. A pooled one is
	// zero (put clears what was used).
	enc := slices.Grow(sc.enc[:0], len(rows))[:len(rows)]
	sc.enc = enc
	if o.strings == "auto" {
		w := distinctWords(len(rows))
		for k := range e.u.p {
			e.u.p[k].words = w
			if o.rightShare > 0 {
				e.u.pr[k].words = w
			}
		}
	}
	// Rows are classified in the order they are given (WAL order, as
	// AppendBatch makes them), each into its place in write order: in
	// write order every row, its parameters and their text were a cache
	// miss, a third of classify's time on 60,000 generated lines.
	pos := slices.Grow(sc.pos[:0], len(rows))[:len(rows)]
	sc.pos = pos
	for x, i := range order {
		pos[i] = int32(x)
	}
	if ranks != nil {
		e.ranked = make([]*tplInfo, nkeys)
	}
	for i := range rows {
		var t *tplInfo
		if ranks != nil {
			t = e.ranked[ranks[i]]
		}
		if t == nil {
			var err error
			r := &rows[i]
			if t, err = e.info(Key{r.TemplateID, r.TemplateVersion}); err != nil {
				return File{}, onceInfo{}, err
			}
			if ranks != nil {
				e.ranked[ranks[i]] = t
			}
		}
		if err := e.classify(&rows[i], t, &enc[pos[i]]); err != nil {
			return File{}, onceInfo{}, err
		}
	}
	if o.rightShare > 0 && e.u.pr[0].words > 0 {
		if l := sumDistinct(&e.u.p); l > 0 && sumDistinct(&e.u.pr) <= o.rightShare*l {
			e.alignRight(enc)
		}
	}
	e.demote(len(rows))
	e.u.rows = len(rows)
	if o.hiLevel != 0 && !o.fullKinds {
		// At zstd's best level, as the other levers that change what a
		// file holds: a busy encoder's files stay readable by a reader
		// of before v8 until compaction rewrites them.
		e.emptyKinds(rows, order, enc)
	}
	if o.hiLevel != 0 && o.plainTrial && o.strings == "auto" {
		e.choosePlain(enc)
	}
	if o.date && len(rows) >= o.dictRows && o.dictDays {
		e.u.fewDays = fewDaysOf(rows)
	}
	if o.rawBytes > 0 {
		// Summed here, not in the map per row: two map writes a row were
		// 5% of Encode in quarry run.
		var src, kinds int
		for i := range rows {
			src += len(rows[i].Source)
		}
		for x := range enc {
			kinds += len(enc[x].kinds)
		}
		e.u.textBytes = map[string]int{colSource: src + 4*len(rows), colKinds: kinds + 4*len(rows)}
	}
	if o.tsMillis {
		e.u.tsMillis = true
		for i := range rows {
			if rows[i].TS%1e6 != 0 {
				e.u.tsMillis = false
				break
			}
		}
	}
	if o.hiLevel != 0 && o.intTrial {
		e.chooseDelta(rows, order, enc)
	}
	switch {
	case o.kinds == "plain":
		e.u.kindsPlain = true
	case o.kinds == "" && o.hiLevel != 0 && o.plainTrial && len(rows) >= o.dictRows && !(o.groupRows > 0 && len(rows) >= 2*o.groupRows):
		// Not in a file of several row groups: a reader hashes a PLAIN
		// kinds value a row, where a dictionary's entries are parsed once,
		// and kinds are a few hundred bytes of such a file.
		e.chooseKinds(enc)
	}
	data, err := e.write(rows, order, enc)
	if err != nil {
		return File{}, onceInfo{}, err
	}
	return File{Data: data, Stats: stats(rows, o.date), Rows: len(rows)}, onceInfo{pickSplits(e.counts), e.sparse, e.u.hasSlots()}, nil
}

// splitCap bounds the distinct texts countRuns counts of a parameter.
const splitCap = 1 << 12

// runCount is what an encode counts of a template version's parameter
// for pickSplits: the rows whose text (for u, without the timestamp) has a
// digit run to split, and the distinct texts and skeletons among them.
type runCount struct {
	rows        int
	vals, skels map[uint64]struct{}
}

// countRuns counts string parameter j of version k, text v, for pickSplits.
func (e *encoder) countRuns(k Key, nparams, j int, v string) {
	var n int
	if e.skel, e.skelRuns, n = splitRuns(e.skel[:0], e.skelRuns[:0], v, maxRuns); n == 0 {
		return
	}
	cs := e.counts[k]
	if cs == nil {
		cs = make([]runCount, nparams)
		e.counts[k] = cs
	}
	c := &cs[j]
	if c.vals == nil {
		c.vals, c.skels = map[uint64]struct{}{}, map[uint64]struct{}{}
	}
	c.rows++
	if len(c.vals) < splitCap {
		c.vals[xxhash.Sum64String(v)] = struct{}{}
	}
	if len(c.skels) < splitCap {
		c.skels[xxhash.Sum64(e.skel)] = struct{}{}
	}
}

// pickSplits picks, per template version and parameter, the string
// parameters split at their digit runs (kind d, v): those of at least 16
// rows with a run whose texts without the runs (skeletons) would be a
// dictionary (distinct at most a quarter of the rows) and whose texts are
// at least four times as many, so that the runs are what varies, as HPC's
// "134681 node-246 unix.hw state_change.unavailable" (29 skeletons in
// 2,000 lines). Splitting every string parameter made the Loghub lakes
// of Linux and Android larger: a value whose fields repeat each other, or
// one that repeats whole, is smaller as text. nil: none picked.
func pickSplits(counts map[Key][]runCount) map[Key][]bool {
	var picks map[Key][]bool
	for k, cs := range counts {
		for j, c := range cs {
			if c.rows >= 16 && 4*len(c.skels) <= c.rows && len(c.vals) >= 4*len(c.skels) {
				if picks == nil {
					picks = map[Key][]bool{}
				}
				if picks[k] == nil {
					picks[k] = make([]bool, len(cs))
				}
				picks[k][j] = true
			}
		}
	}
	return picks
}

// sortRows returns the order rows are written in: by template (when
// byTpl) and WAL position. Rows given in WAL order, as AppendBatch makes
// them, are bucketed by template in linear time.
func sortRows(rows []Row, byTpl bool) []int32 {
	order, _, _ := sortRanks(rows, byTpl)
	return order
}

// sortRanks is sortRows, and for rows bucketed by template (WAL order,
// byTpl) each row's template rank too, 0 to n-1 in template order: an
// index for classify's per-template state, which a map lookup a row (the
// Key hashed) found before. ranks is nil for rows sorted otherwise.
func sortRanks(rows []Row, byTpl bool) (order, ranks []int32, n int) {
	order = make([]int32, len(rows))
	walOrdered := true
	for i := range order {
		order[i] = int32(i)
		if i > 0 && walOrdered {
			x, y := &rows[i-1], &rows[i]
			walOrdered = x.WALSeq < y.WALSeq || (x.WALSeq == y.WALSeq && x.Index < y.Index)
		}
	}
	if walOrdered && !byTpl {
		return order, nil, 0
	}
	if walOrdered {
		// A counting sort on the templates' ranks keeps WAL order within one.
		rank := map[Key]int32{}
		var last Key
		for i := range rows {
			// Neighbouring lines often share a template: one map write for
			// a run of them.
			if k := (Key{rows[i].TemplateID, rows[i].TemplateVersion}); i == 0 || k != last {
				rank[k] = 0
				last = k
			}
		}
		keys := make([]Key, 0, len(rank))
		for k := range rank {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b Key) int {
			if c := cmp.Compare(a.ID, b.ID); c != 0 {
				return c
			}
			return cmp.Compare(a.Version, b.Version)
		})
		start := make([]int32, len(keys)+1)
		for i, k := range keys {
			rank[k] = int32(i)
		}
		ranks = make([]int32, len(rows))
		var r int32
		for i := range rows {
			if k := (Key{rows[i].TemplateID, rows[i].TemplateVersion}); i == 0 || k != last {
				r, last = rank[k], k
			}
			ranks[i] = r
			start[r+1]++
		}
		for i := 1; i < len(start); i++ {
			start[i] += start[i-1]
		}
		for i, r := range ranks {
			order[start[r]] = int32(i)
			start[r]++
		}
		return order, ranks, len(keys)
	}
	slices.SortFunc(order, func(a, b int32) int {
		x, y := &rows[a], &rows[b]
		if byTpl {
			if c := cmp.Compare(x.TemplateID, y.TemplateID); c != 0 {
				return c
			}
			if c := cmp.Compare(x.TemplateVersion, y.TemplateVersion); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(x.WALSeq, y.WALSeq); c != 0 {
			return c
		}
		return cmp.Compare(x.Index, y.Index)
	})
	return order, nil, 0
}

func (e *encoder) info(k Key) (*tplInfo, error) {
	if e.lastInfo != nil && k == e.lastKey {
		return e.lastInfo, nil // neighbouring rows often share a template
	}
	if t, ok := e.infos[k]; ok {
		e.lastKey, e.lastInfo = k, t
		return t, nil
	}
	text, ok := e.tpl[k]
	if !ok {
		return nil, fmt.Errorf("%w: template %d version %d not given", ErrInput, k.ID, k.Version)
	}
	t := &tplInfo{pieces: strings.Split(text, Wildcard)}
	if e.picks != nil {
		if t.split = e.picks[k]; t.split == nil {
			t.split = make([]bool, len(t.pieces)-1)
		}
	}
	e.infos[k] = t
	e.lastKey, e.lastInfo = k, t
	return t, nil
}

// classify decides each parameter's kind and fills the usage of r's
// columns; t is r's template.
func (e *encoder) classify(r *Row, t *tplInfo, out *encoded) error {
	if len(t.pieces)-1 != len(r.Params) {
		return fmt.Errorf("%w: template %d version %d has %d wildcards, record wal %d index %d has %d params",
			ErrInput, r.TemplateID, r.TemplateVersion, len(t.pieces)-1, r.WALSeq, r.Index, len(r.Params))
	}
	t.rows++
	if e.gatherPairs {
		if t.pairs == nil {
			t.pairs = new(pairSeen)
		}
		for _, p := range r.Params {
			t.pairs.addParam(p, &t.seen)
		}
	} else {
		for _, p := range r.Params {
			for j := 0; j < len(p); j++ {
				t.seen[p[j]] = true
			}
		}
	}
	out.s = span{off: int32(len(e.svals))}
	out.n = span{off: int32(len(e.nv))}
	out.b = span{off: int32(len(e.bvals))}
	out.m = span{off: int32(len(e.midx))}
	out.d = span{off: int32(len(e.dits))}
	e.kbuf = e.kbuf[:0]
	e.runs = e.runs[:0]
	tsFirst, tsLast, layout, res, inner := e.findTime(r, t)
	coverTo := -1 // the last parameter a w item covers
	if len(res) > 0 {
		out.residue = res
		e.u.residue = true
	}
	for j, p := range r.Params {
		switch {
		case j == tsFirst && inner[1] > 0:
			// The text around the timestamp, in the next p column.
			if k := out.s.cnt; k < MaxSlots && utf8.ValidString(p) {
				// and the other times in it in n columns (y).
				if e.o.shift && !e.o.untyped {
					if ins := e.innerShifts(t, p, inner, r.TS, MaxSlots-int(out.n.cnt)-len(e.runs)); len(ins) > 0 {
						e.kbuf = append(e.kbuf, kindInnerW, 'A'+byte(layout), '0'+byte(inner[0]), '0'+byte(len(ins)))
						start, at := len(e.arena), 0
						tsDone := false
						for x := 0; x <= len(ins); x++ {
							if !tsDone && (x == len(ins) || inner[0] < ins[x].off) {
								e.arena = append(e.arena, p[at:inner[0]]...)
								at, tsDone = inner[0]+inner[1], true
							}
							if x < len(ins) {
								e.arena = append(e.arena, p[at:ins[x].off]...)
								at = ins[x].end
								e.kbuf = append(e.kbuf, 'A'+byte(ins[x].layout), '0'+byte(ins[x].off), '0'+ins[x].nres)
								e.kbuf = append(e.kbuf, ins[x].residue()...)
							}
						}
						e.arena = append(e.arena, p[at:]...)
						v := unsafeString(e.arena[start:])
						e.addP(k, v)
						e.svals = append(e.svals, v)
						e.sj = append(e.sj, int32(j))
						out.s.cnt++
						for _, x := range ins {
							e.u.n[out.n.cnt]++
							e.u.nShift[out.n.cnt]++
							e.nv = append(e.nv, x.n)
							e.nj = append(e.nj, int32(j))
							out.n.cnt++
						}
						e.u.shift = true
						continue
					}
				}
				start := len(e.arena)
				e.arena = append(e.arena, p[:inner[0]]...)
				e.arena = append(e.arena, p[inner[0]+inner[1]:]...)
				cut := unsafeString(e.arena[start:])
				nr := 0
				if e.counts != nil {
					e.countRuns(Key{r.TemplateID, r.TemplateVersion}, len(r.Params), j, cut)
				}
				if e.split && (t.split == nil || t.split[j]) {
					// The text around the timestamp split at its digit runs (v).
					e.arena, e.runs, nr = splitRuns(e.arena, e.runs, cut, min(maxRuns, MaxSlots-int(out.n.cnt)-len(e.runs)))
				}
				v := cut
				if nr > 0 {
					e.kbuf = append(e.kbuf, kindInnerD, 'A'+byte(layout), '0'+byte(inner[0]), '0'+byte(nr))
					v = unsafeString(e.arena[start+len(cut):])
					e.dits = append(e.dits, dItem{j: int32(j), s: k, runs: int8(nr), text: cut})
					out.d.cnt++
				} else {
					e.kbuf = append(e.kbuf, kindInner, 'A'+byte(layout), '0'+byte(inner[0]))
				}
				e.addP(k, v)
				e.svals = append(e.svals, v)
				e.sj = append(e.sj, int32(j))
				out.s.cnt++
				continue
			}
		case j == tsFirst:
			e.kbuf = append(e.kbuf, kindTime, 'A'+byte(layout))
			continue
		case j > tsFirst && j <= tsLast, j <= coverTo:
			e.kbuf = append(e.kbuf, kindCovered)
			continue
		}
		var kind byte
		var digits uint8
		var v int64
		var other innerShift
		if out.n.cnt+int32(len(e.runs)) < MaxSlots && !e.o.untyped {
			if e.o.classify != nil {
				kind, digits, v = e.o.classify(p)
			} else {
				kind, digits, v = classify(p)
			}
			if kind == kindString && e.o.shift {
				stop := len(r.Params) // a w item covers none of the timestamp's parameters
				if tsFirst > j {
					stop = tsFirst
				}
				if ot, last, ok := e.shift(t, j, r.Params[:stop], r.TS); ok {
					kind, v, other, coverTo = kindShift, ot.n, ot, last
				}
			}
		} else if kind = kindString; !utf8.ValidString(p) {
			kind = kindBytes
		}
		if kind == kindString && e.counts != nil && out.s.cnt < MaxSlots {
			e.countRuns(Key{r.TemplateID, r.TemplateVersion}, len(r.Params), j, p)
		}
		if kind == kindString && e.split && (t.split == nil || t.split[j]) && out.s.cnt < MaxSlots {
			start, nr := len(e.arena), 0
			e.arena, e.runs, nr = splitRuns(e.arena, e.runs, p, min(maxRuns, MaxSlots-int(out.n.cnt)-len(e.runs)))
			if nr > 0 {
				e.kbuf = append(e.kbuf, kindDigits, '0'+byte(nr))
				skel := unsafeString(e.arena[start:])
				k := out.s.cnt
				e.addP(k, skel)
				e.svals = append(e.svals, skel)
				e.sj = append(e.sj, int32(j))
				e.dits = append(e.dits, dItem{j: int32(j), s: k, runs: int8(nr), text: p})
				out.s.cnt++
				out.d.cnt++
				continue
			}
		}
		e.kbuf = append(e.kbuf, kind)
		switch kind {
		case kindString:
			if k := out.s.cnt; k < MaxSlots {
				e.addP(k, p)
				e.svals = append(e.svals, p)
				e.sj = append(e.sj, int32(j))
				out.s.cnt++
			} else {
				e.midx = append(e.midx, int32(j))
				out.m.cnt++
				e.u.more = true
			}
		case kindBytes:
			if k := out.b.cnt; k < MaxSlots {
				e.u.b[k]++
				e.bvals = append(e.bvals, p)
				e.bj = append(e.bj, int32(j))
				out.b.cnt++
			} else {
				e.midx = append(e.midx, int32(j))
				out.m.cnt++
				e.u.more = true
			}
		default:
			switch kind {
			case kindDecimal:
				e.kbuf = append(e.kbuf, '0'+digits)
			case kindShift:
				e.kbuf = append(e.kbuf, 'A'+byte(other.layout), '0'+other.nres)
				e.kbuf = append(e.kbuf, other.residue()...)
				e.u.shift = true
				e.u.nShift[out.n.cnt]++
			}
			e.u.n[out.n.cnt]++
			e.nv = append(e.nv, v)
			e.nj = append(e.nj, int32(j))
			out.n.cnt++
		}
	}
	if len(e.runs) > 0 {
		// The runs take the n columns after the row's numeric parameters
		// (parseKinds), so those keep their columns on every row of a
		// template whatever its strings split into.
		x := 0
		for _, d := range e.dits[out.d.off : out.d.off+out.d.cnt] {
			for range d.runs {
				e.u.n[out.n.cnt]++
				e.nv = append(e.nv, e.runs[x])
				e.nj = append(e.nj, d.j)
				out.n.cnt++
				x++
			}
		}
		e.u.digits = true
	}
	if e.u.pr[0].words > 0 {
		e.addRight(out.s)
	}
	if len(r.Attrs) > 0 {
		e.u.attrs = true
	}
	// Most rows have the kinds of their template's row before: rows of
	// many sources interleave templates, and a map lookup a row (hashing
	// the kinds) was 2.5% of Encode on such rows.
	if t.kinds != string(e.kbuf) {
		k, ok := e.kinds[string(e.kbuf)]
		if !ok {
			k = string(e.kbuf)
			e.kinds[k] = k
		}
		t.kinds = k
	}
	out.kinds = t.kinds
	return nil
}

// addP counts a row's k-th string value v in its column's estimate
// (strStats) and, when the file may be aligned right, keeps the bit it set
// for addRight: one hash and one division a value for both estimates.
func (e *encoder) addP(k int32, v string) {
	var b uint64 // the value's bit + 1; 0: not hashed
	if st := &e.u.p[k]; st.count(v) {
		b = st.bit(xxhash.Sum64String(v)) + 1
		st.setBit(b - 1)
	}
	if e.u.pr[0].words > 0 {
		e.hashes = append(e.hashes[:k], b)
	}
}

// rightAligned reports whether a row of n string values is numbered from
// the right in a file aligned so: two or more, and not past the columns
// (a 33rd would be in more, which stays in parameter order).
func rightAligned(n int32) bool { return n >= 2 && n < MaxSlots }

// addRight counts the row's string values s in the estimates of the p
// columns as alignRight would number them.
func (e *encoder) addRight(s span) {
	vals := e.svals[s.off : s.off+s.cnt]
	for i, v := range vals {
		k := i
		if rightAligned(s.cnt) {
			k = len(vals) - 1 - i
		}
		if st := &e.u.pr[k]; st.count(v) {
			b := e.hashes[i]
			if b == 0 {
				b = st.bit(xxhash.Sum64String(v)) + 1
			}
			st.setBit(b - 1)
		}
	}
}

// emptyKinds writes the empty kinds value (records v8) for the rows of a
// template with wildcards whose kinds are s items only, or whose
// parameters are all in more and of kinds that render their item's text
// (s, i, f, a, x, b: a reader takes each s item from more when its p
// column has no value for the row). A reader reads the empty value as s
// items, one per wildcard of the row's template (stringSlots). In a file
// of lines without timestamps (apt's term.log, a build's output) most rows
// have s items only, and a value a row that repeats how many wildcards its
// template has takes as many bytes as template_id: term.log's kinds 983
// bytes of its 26,566, 110 so (docs/formats.md, records v8).
func (e *encoder) emptyKinds(rows []Row, order []int32, enc []encoded) {
	var last string
	lastStrings, lastPlain := false, false
	for x := range enc {
		en := &enc[x]
		if en.kinds == "" {
			continue
		}
		if en.kinds != last {
			last = en.kinds
			lastStrings = strings.Trim(last, string(rune(kindString))) == ""
			lastPlain = textItems(last)
		}
		switch {
		case lastStrings:
		case lastPlain && len(e.moreItems(&rows[order[x]], en)) == len(rows[order[x]].Params):
		default:
			continue
		}
		en.kinds = ""
		e.u.emptyKinds = true
	}
}

// textItems reports whether kinds (after a leading r) has only items whose
// parameter, in more, is its item's text: s, i, f, a, x and b.
func textItems(kinds string) bool {
	if len(kinds) > 0 && kinds[0] == kindRight {
		kinds = kinds[1:]
	}
	for i := 0; i < len(kinds); i++ {
		switch kinds[i] {
		case kindString, kindInt, kindIPv4, kindHex, kindBytes:
		case kindDecimal:
			i++ // its digit count
		default:
			return false
		}
	}
	return true
}

// alignRight numbers the string parameters of every row of two or more
// (rightAligned) from the right: the last in p0, the one before in p1 and
// so on, and marks the row's kinds with a leading 'r' (records v4). It pays
// where templates share trailing parameters but not leading ones, as
// dpkg.log's "status half-configured libfoo:amd64 1.2-3" and "configure
// libfoo:amd64 1.2-3 <none>": numbered from the left, the package name is
// in p1 in one and p0 in the other, its repeats in two dictionaries.
func (e *encoder) alignRight(enc []encoded) {
	if e.rkinds == nil {
		e.rkinds = map[string]string{}
	}
	var last, lastR string
	for x := range enc {
		en := &enc[x]
		if !rightAligned(en.s.cnt) {
			continue
		}
		slices.Reverse(e.svals[en.s.off : en.s.off+en.s.cnt])
		slices.Reverse(e.sj[en.s.off : en.s.off+en.s.cnt])
		if en.kinds != last || lastR == "" {
			r, ok := e.rkinds[en.kinds]
			if !ok {
				r = string(kindRight) + en.kinds
				e.rkinds[en.kinds] = r
			}
			last, lastR = en.kinds, r
		}
		en.kinds = lastR
	}
	e.u.p, e.u.right = e.u.pr, true
}

// shiftProbes is how many rows' parameter at one place of a template
// version shift tries in every layout before it gives up on that place.
const shiftProbes = 4

// shiftSlack bounds how far another time of a line may lie from its ts:
// a local time is within a day of UTC, a local date within two. (Or from
// ts moved to the time's year: nearTS.)
const shiftSlack = 2 * 24 * int64(time.Hour)

// maxSpan is how many bytes of the parameters after a place shift reads
// for a time the miner cut at its separators.
const maxSpan = 48

// shift reports parameters j to last of a row of template t to be another
// time of the line than its timestamp: a timestamp (eventtime.Parser.
// ParseItem) with a residue of at most maxResidue printable bytes (the
// kinds string holds it) near the row's ts (nearTS; ts in nanoseconds, the
// file keeps microseconds) that is all of parameter j or, where the miner
// cut it at its separators, parameters j to last and the template text
// between them, and n the steps of the layout from ts's step to it (kind
// w, then c for j+1 to last; shifted renders it back). BGL's lines carry
// the epoch (ts), then the local date and the local time of the same
// instant, hours off: those two become a small number each. Linux's ftpd
// lines end in "at Fri Jun 17 07:07:00 2005", mined as "Fri Jun 17 07",
// "07" and "00 2005" around two ':'. Once a place of t found a layout, its
// rows try only that one; a place where shiftProbes rows found none is not
// tried again.
func (e *encoder) shift(t *tplInfo, j int, params []string, ts int64) (ot innerShift, last int, ok bool) {
	p := params[j]
	if len(p) < 3 || len(p) > 40 || !(p[0]-'0' < 10 || p[0]-'A' < 26) {
		return innerShift{}, j, false
	}
	if t.shift == nil {
		t.shift = make([]int8, len(t.pieces)-1)
	}
	st := t.shift[j]
	if st <= -shiftProbes {
		return innerShift{}, j, false
	}
	only := eventtime.LayoutNone
	if st > 0 {
		only = eventtime.LayoutID(st)
	}
	last = j
	ot, ok = e.shiftAt(p, ts, only)
	ok = ok && ot.end == len(p)
	if !ok && j+1 < len(params) && len(t.pieces[j+1]) <= 3 {
		// The parameters after it, with the template text between them.
		e.span, e.ends = append(e.span[:0], p...), append(e.ends[:0], len(p))
		for k := j + 1; k < len(params) && len(e.span) < maxSpan; k++ {
			e.span = append(append(e.span, t.pieces[k]...), params[k]...)
			e.ends = append(e.ends, len(e.span))
		}
		if ot, ok = e.shiftAt(unsafeString(e.span), ts, only); ok {
			x := slices.Index(e.ends, ot.end)
			ok = x > 0
			last = j + x
		}
	}
	switch {
	case ok && st <= 0:
		t.shift[j] = int8(ot.layout)
	case !ok && st <= 0:
		t.shift[j]--
	}
	return ot, last, ok
}

// nearTS reports whether at lies within shiftSlack of base (ts), or of
// base moved to at's year: a time of the line whose year differs from a
// ts whose year was inferred (a syslog header has none, and eventtime
// takes it from the time the line was read), as Linux's ftpd lines carry
// "at Fri Jun 17 07:07:00 2005" after a header "Jun 17 07:07:00". Such a
// time follows ts, so its steps from ts hardly change; a time far from ts
// that does not (a build date) stays text, where a dictionary holds it.
func nearTS(at, base time.Time) bool {
	d := at.Sub(base)
	if d >= -time.Duration(shiftSlack) && d <= time.Duration(shiftSlack) {
		return true
	}
	if y := at.UTC().Year() - base.UTC().Year(); y != 0 {
		d = at.Sub(base.AddDate(y, 0, 0))
		return d >= -time.Duration(shiftSlack) && d <= time.Duration(shiftSlack)
	}
	return false
}

// shiftAt reads a timestamp at the start of p (in layout only, if valid)
// and returns it as the steps n of its layout from ts, with where it ends
// (off 0), when it lies within shiftSlack of ts, its residue is at most
// maxResidue printable bytes, and it renders back from n exactly.
func (e *encoder) shiftAt(p string, ts int64, only eventtime.LayoutID) (innerShift, bool) {
	if e.stamps == nil {
		var err error
		if e.stamps, err = eventtime.New(eventtime.Config{Mode: eventtime.ModeNone, Zone: "UTC"}); err != nil {
			return innerShift{}, false
		}
	}
	base := floorDiv(ts, 1000) * 1000 // ts as the file keeps it
	at, l, res, end, ok := e.stamps.ParseItem(unsafeBytes(p), floorDiv(base, 1e9), only)
	if !ok || len(res) > maxResidue || !printable(res) {
		return innerShift{}, false
	}
	if !nearTS(at, time.Unix(0, base)) {
		return innerShift{}, false
	}
	ot := innerShift{end: end, layout: l, nres: uint8(len(res))}
	copy(ot.res[:], res)
	step := eventtime.Step(l, res)
	ot.n = floorDiv(at.UnixNano(), step) - floorDiv(base, step)
	e.tbuf = eventtime.Render(e.tbuf[:0], shifted(base, l, ot.residue(), ot.n), l, ot.residue())
	if string(e.tbuf) != p[:end] {
		return innerShift{}, false
	}
	return ot, true
}

// innerShift is another time of a line (kinds w and y): its place in its
// parameter, layout, residue and steps from ts.
type innerShift struct {
	off, end int
	layout   eventtime.LayoutID
	n        int64
	res      [maxResidue]byte
	nres     uint8
}

func (s *innerShift) residue() []byte { return s.res[:s.nres] }

// innerShifts finds the other times of the line inside the parameter of a
// row of template t that holds the line's timestamp, p, at tsAt
// (p[tsAt[0]:tsAt[0]+tsAt[1]]), as shift does for a whole parameter: at the start
// of p or of a word of it (after a blank), at an offset a kinds item can
// hold (maxInner), at most room of them and maxShifts. BGL's header is one
// parameter, "- 1117838570 2005.06.03 R02-M1-N0-C:J12-U11
// 2005-06-03-15.42.50.675872 R02-M1-N0-C:J12-U11 RAS KERNEL INFO": the
// epoch is ts, the local date and time are two such. A template whose
// shiftProbes rows had none is not tried again. (Its state is its own,
// not shift's of a parameter: the timestamp's parameter of one row may be
// a plain one of another.)
func (e *encoder) innerShifts(t *tplInfo, p string, tsAt [2]int, ts int64, room int) []innerShift {
	room = min(room, maxShifts)
	if room <= 0 || t.innerProbes <= -shiftProbes {
		return nil
	}
	out := e.shifts[:0]
	// The places and layouts the version's row before had, where they
	// hold again (a header of fixed shape), without a scan.
	if last := t.inner; len(last) > 0 && len(last) <= room {
		for _, a := range last {
			if a.off >= len(p) || a.off >= tsAt[0] && a.off < tsAt[0]+tsAt[1] {
				break
			}
			ot, ok := e.shiftAt(p[a.off:], ts, a.layout)
			if !ok || a.off < tsAt[0] && a.off+ot.end > tsAt[0] || len(out) > 0 && a.off < out[len(out)-1].end {
				break
			}
			ot.off, ot.end = a.off, a.off+ot.end
			out = append(out, ot)
		}
		if len(out) == len(last) {
			e.shifts = out
			return out
		}
		out = out[:0]
	}
	for i := 0; i <= min(maxInner, len(p)-8) && len(out) < room; i++ {
		if i > 0 && p[i-1] != ' ' || i >= tsAt[0] && i < tsAt[0]+tsAt[1] || !(p[i]-'0' < 10 || p[i]-'A' < 26) {
			continue
		}
		ot, ok := e.shiftAt(p[i:], ts, eventtime.LayoutNone)
		if !ok || i < tsAt[0] && i+ot.end > tsAt[0] {
			continue
		}
		ot.off, ot.end = i, i+ot.end
		out = append(out, ot)
		i = ot.end - 1
	}
	e.shifts = out
	t.inner = append(t.inner[:0], out...)
	switch {
	case len(out) > 0:
		t.innerProbes = 1
	case t.innerProbes <= 0:
		t.innerProbes--
	}
	return out
}

// findTime renders r's line, finds its timestamp and reports the
// parameters first..last it covers exactly when the timestamp renders back
// from r's ts, with the residue Render needs. first is -1 when there is
// none.
//
// When the timestamp lies inside one parameter without being all of it,
// first = last is that parameter and inner is the timestamp's offset and
// length in it (inner[1] > 0).
func (e *encoder) findTime(r *Row, t *tplInfo) (first, last int, layout eventtime.LayoutID, residue []byte, inner [2]int) {
	if len(r.Params) == 0 {
		return -1, -1, 0, nil, inner
	}
	e.line, e.offs = e.line[:0], e.offs[:0]
	for j, p := range r.Params {
		e.line = append(e.line, t.pieces[j]...)
		e.offs = append(e.offs, len(e.line))
		e.line = append(e.line, p...)
		if len(e.line) >= eventtime.Window+64 {
			break
		}
	}
	m, res, ok := e.parser.Parse(e.line)
	if !ok {
		return -1, -1, 0, nil, inner
	}
	first, last = -1, -1
	for j, off := range e.offs {
		end := off + len(r.Params[j])
		if first < 0 && e.o.innerTime && off <= m.Start && m.End <= end && (off != m.Start || end != m.End) {
			first, last = j, j
			inner = [2]int{m.Start - off, m.End - m.Start}
			break
		}
		if off == m.Start && first < 0 {
			first = j
		}
		if first >= 0 && end == m.End {
			last = j
			break
		}
		if off > m.End {
			break
		}
	}
	if first < 0 || last < 0 || inner[0] > maxInner {
		return -1, -1, 0, nil, [2]int{}
	}
	// The file keeps microseconds: the nanoseconds below them go in the
	// residue (a text such as dockerd's "29.906963455Z").
	if ns := r.TS - floorDiv(r.TS, 1000)*1000; ns != 0 {
		e.nsres = eventtime.AppendNanos(append(e.nsres[:0], res...), int(ns))
		res = e.nsres
	}
	// Neighbouring rows often share a timestamp: render it once.
	if us := floorDiv(r.TS, 1000); !e.tsValid || us != e.tsMicros || m.Layout != e.tsLayout || !bytes.Equal(res, e.tsRes) {
		e.tsbuf = eventtime.Render(e.tsbuf[:0], time.UnixMicro(us), m.Layout, res)
		e.tsValid, e.tsMicros, e.tsLayout, e.tsRes = true, us, m.Layout, append(e.tsRes[:0], res...)
	}
	if !bytes.Equal(e.tsbuf, e.line[m.Start:m.End]) {
		return -1, -1, 0, nil, [2]int{}
	}
	if len(res) > 0 {
		start := len(e.resbuf)
		e.resbuf = append(e.resbuf, res...)
		residue = e.resbuf[start:len(e.resbuf):len(e.resbuf)]
	}
	return first, last, m.Layout, residue, inner
}

// write builds the file's schema from the usage and writes the rows in
// order.
func (e *encoder) write(rows []Row, order []int32, enc []encoded) ([]byte, error) {
	if e.u.more && e.o.hiLevel != 0 && e.o.moreText != "off" && e.chooseMoreText(rows, order, enc, e.o.moreText == "on") {
		e.u.more, e.u.moreText = false, true
	}
	schema := schemaFor(&e.u, e.o)
	cols := columnsOf(schema)
	version := "3"
	switch {
	case e.u.emptyKinds:
		version = "8"
	case e.u.moreText:
		version = "7"
	case e.u.shift:
		version = "6"
	case e.u.digits:
		version = "5"
	case e.u.right:
		version = "4"
	}
	var buf bytes.Buffer
	opts := []parquet.WriterOption{
		schema,
		parquet.Compression(codec(e.o.level)),
		parquet.PageBufferSize(e.pageBuffer(len(rows))),
		parquet.DataPageStatistics(!e.o.noPageStats),
		parquet.DataPageVersion(e.o.pageVersion),
		parquet.DefaultEncodingFor(parquet.ByteArray, deltaLen),
		parquet.CreatedBy("quarry", "", ""),
		parquet.KeyValueMetadata("quarry.records.version", version),
		parquet.KeyValueMetadata(SummaryKey, encodeSummary(e.summary())),
	}
	if e.tail > 0 {
		opts = append(opts, parquet.KeyValueMetadata(TailKey, strconv.Itoa(e.o.rareRows)))
	}
	if e.gatherPairs {
		if v := encodePairs(e.pairs()); v != "" {
			opts = append(opts, parquet.KeyValueMetadata(PairsKey, v))
		}
	}
	cuts := e.groupCuts(rows, order)
	keep := statsColumns
	if len(cuts) == 2 {
		keep = nil // one row group: its bounds are the file's, in its add action (statsColumns)
	}
	if e.o.trimFooter {
		// The trimmed footer keeps only keep's bounds: computing the
		// others' is wasted work.
		for _, path := range schema.Columns() {
			if len(path) != 1 || !keep[path[0]] {
				opts = append(opts, parquet.SkipPageBounds(path...))
			}
		}
	}
	w := parquet.NewWriter(&buf, opts...)
	// Column by column: each column's values for a batch of whole rows.
	// enc is in write order, so are the batches.
	const batch = 16384
	// The values' scratch is reused across encodes (scratch.put clears it).
	e.vals = slices.Grow(e.vals[:0], min(len(order), batch)+64)
	for g := 1; g < len(cuts); g++ {
		if g > 1 {
			// The rows before are a row group of their own.
			if err := w.Flush(); err != nil {
				return nil, fmt.Errorf("flush parquet row group: %w", err)
			}
		}
		if err := e.writeRows(w.ColumnWriters(), cols, rows, order, enc, cuts[g-1], cuts[g]); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("close parquet writer: %w", err)
	}
	if !e.o.trimFooter {
		return buf.Bytes(), nil
	}
	data, err := trimFooter(buf.Bytes(), keep)
	if err != nil || !e.o.noCRC {
		return data, err
	}
	return dropChecksums(data)
}

// groupCuts returns where row groups start in write order, with len(order)
// last: [0, len(order)] for one row group. Rows come sorted by template, so
// a row group of its own for a large template group lets a reader that
// keeps other templates skip it by template_id's chunk statistics, without
// decompressing it. A row group costs footer bytes (a column chunk's
// metadata per column) and compression context, so groups are cut only
// between templates and only once at least o.groupRows rows are gathered:
// small template groups share a row group, a large one ends its own.
//
// The rows of rare versions (e.tail, rareLast) end the order; they are a
// row group of their own, so a term that keeps them (a rare version's
// summary has no byte set to rule it out) reads them and not a row of
// every other row group.
func (e *encoder) groupCuts(rows []Row, order []int32) []int {
	cuts := []int{0}
	if e.o.groupRows <= 0 || len(order) < 2*e.o.groupRows {
		return append(cuts, len(order))
	}
	head := len(order) - e.tail
	start := 0
	for x := 1; x < head; x++ {
		a, b := &rows[order[x-1]], &rows[order[x]]
		if a.TemplateID == b.TemplateID && a.TemplateVersion == b.TemplateVersion {
			continue
		}
		// x starts a new template group: cut when the rows gathered since
		// the last cut are many enough and so are the rows left.
		if x-start >= e.o.groupRows && head-x >= e.o.groupRows {
			cuts = append(cuts, x)
			start = x
		}
	}
	if e.tail > 0 && head > 0 {
		cuts = append(cuts, head)
	}
	return append(cuts, len(order))
}

// rareLast moves, in order (sorted by template), the rows of the template
// versions with fewer than rare rows behind the others, keeping the order
// within each part, and returns how many rows it moved. A rare version's
// summary entry has no byte set (paramBytesMinRows), so a text term keeps
// it: gathered at the end, its rows are one row group instead of a few
// rows in each.
func rareLast(rows []Row, order []int32, rare int) int {
	key := func(x int) Key { r := &rows[order[x]]; return Key{r.TemplateID, r.TemplateVersion} }
	moved := 0
	for x := 0; x < len(order); {
		y := x + 1
		for y < len(order) && key(y) == key(x) {
			y++
		}
		if y-x < rare {
			moved += y - x
		}
		x = y
	}
	if moved == 0 || moved == len(order) {
		return 0
	}
	out := make([]int32, 0, len(order))
	tail := make([]int32, 0, moved)
	for x := 0; x < len(order); {
		y := x + 1
		for y < len(order) && key(y) == key(x) {
			y++
		}
		if y-x < rare {
			tail = append(tail, order[x:y]...)
		} else {
			out = append(out, order[x:y]...)
		}
		x = y
	}
	copy(order, append(out, tail...))
	return moved
}

// writeRows writes rows order[lo:hi] (enc[lo:hi]) column by column: each
// column's values for a batch of whole rows.
func (e *encoder) writeRows(cws []*parquet.ColumnWriter, cols []column, rows []Row, order []int32, enc []encoded, from, to int) error {
	const batch = 16384
	vals := e.vals[:0]
	used := len(e.vals) // the most values of a batch so far, for scratch.put to clear
	defer func() { e.vals = vals[:used] }()
	for ci, c := range cols {
		for lo := from; lo < to; lo += batch {
			vals = vals[:0]
			hi := min(lo+batch, to)
			part, pe := order[lo:hi], enc[lo:hi]
			switch c.kind {
			case cP, cN, cB:
				vals = e.appendSlot(vals, c, ci, pe)
			case cWALSeq, cIndex, cTS, cTSSource, cTemplateID, cVersion, cDate:
				vals = appendRequired(vals, c.kind, rows, part, e.u.tsMillis)
			case cSource:
				for _, i := range part {
					vals = append(vals, parquet.ByteArrayValue(unsafeBytes(rows[i].Source)))
				}
			case cKinds:
				for x := range pe {
					vals = append(vals, parquet.ByteArrayValue(unsafeBytes(pe[x].kinds)))
				}
			default:
				for x, i := range part {
					vals = e.appendCell(vals, c, ci, &rows[i], &pe[x])
				}
			}
			used = max(used, len(vals))
			if _, err := cws[ci].WriteRowValues(vals); err != nil {
				return fmt.Errorf("write parquet column %d: %w", ci, err)
			}
		}
	}
	return nil
}

// pageBuffer is the writer's page buffer: o.pageBuffer, or less when the
// largest column is smaller, so a small file does not allocate (and clear)
// a full buffer per column. Every column still fits one page.
func (e *encoder) pageBuffer(rows int) int {
	need := 8 * rows
	for i := range e.u.p {
		need = max(need, e.u.p[i].bytes)
	}
	need += need/8 + 4<<10
	return min(e.o.pageBuffer, need)
}

// codecs are the zstd codecs per level, shared by all encodes so their
// encoders (and history buffers) are reused, not made per file.
var codecs = [...]*zstdCodec{
	zstd.SpeedFastest:           newZstdCodec(zstd.SpeedFastest),
	zstd.SpeedDefault:           newZstdCodec(zstd.SpeedDefault),
	zstd.SpeedBetterCompression: newZstdCodec(zstd.SpeedBetterCompression),
	zstd.SpeedBestCompression:   newZstdCodec(zstd.SpeedBestCompression),
}

func codec(l zstd.Level) *zstdCodec {
	if int(l) < len(codecs) && codecs[l] != nil {
		return codecs[l]
	}
	return codecs[zstd.SpeedDefault]
}

// column kinds of a file's leaf columns.
const (
	cWALSeq = iota
	cIndex
	cTS
	cTSSource
	cTemplateID
	cVersion
	cSource
	cKinds
	cResidue
	cP
	cN
	cB
	cMore
	cMoreText
	cAttrKey
	cAttrValue
	cDate
	cUnknown // a column records v3 does not define: not read
)

type column struct {
	kind   int
	slot   int
	maxDef int
	maxRep int   // a repeated column's (more, attrs) maximum repetition level
	unit   int64 // ts: nanoseconds per stored unit
}

// columnsOf maps a schema's leaf columns, in column index order.
func columnsOf(s *parquet.Schema) []column {
	paths := s.Columns()
	cols := make([]column, len(paths))
	for i, path := range paths {
		leaf, _ := s.Lookup(path...)
		c := column{maxDef: leaf.MaxDefinitionLevel, maxRep: leaf.MaxRepetitionLevel, slot: -1}
		switch name := path[0]; name {
		case colWALSeq:
			c.kind = cWALSeq
		case colIndex:
			c.kind = cIndex
		case colTS:
			c.kind, c.unit = cTS, 1000
			if lt := leaf.Node.Type().LogicalType(); lt != nil {
				if ts, ok := lt.Value.(*format.TimestampType); ok {
					switch ts.Unit.Value.(type) {
					case *format.MilliSeconds:
						c.unit = 1e6
					case *format.NanoSeconds:
						c.unit = 1
					}
				}
			}
		case colTSSource:
			c.kind = cTSSource
		case colDate:
			c.kind = cDate
		case colTemplateID:
			c.kind = cTemplateID
		case colVersion:
			c.kind = cVersion
		case colSource:
			c.kind = cSource
		case colKinds:
			c.kind = cKinds
		case colResidue:
			c.kind = cResidue
		case colMore:
			c.kind = cMore
		case colMoreText:
			c.kind = cMoreText
		case colAttrs:
			c.kind = cAttrKey
			if path[len(path)-1] == "value" {
				c.kind = cAttrValue
			}
		default:
			c.kind = cUnknown
			if len(name) > 1 && len(name) <= 4 && strings.Trim(name[1:], "0123456789") == "" {
				if k, ok := map[byte]int{'p': cP, 'n': cN, 'b': cB}[name[0]]; ok {
					c.kind, c.slot = k, atoiSlot(name[1:])
				}
			}
		}
		cols[i] = c
	}
	return cols
}

func atoiSlot(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// appendSlot appends the values of slot column c (p, n or b) for the rows
// part: the hot loop, many cells are null.
func (e *encoder) appendSlot(vals []parquet.Value, c column, ci int, enc []encoded) []parquet.Value {
	null := level(parquet.NullValue(), 0, 0, ci)
	k := int32(c.slot)
	switch c.kind {
	case cN:
		for x := range enc {
			if en := &enc[x]; k < en.n.cnt {
				vals = append(vals, level(parquet.Int64Value(e.nv[en.n.off+k]), 0, c.maxDef, ci))
			} else {
				vals = append(vals, null)
			}
		}
	default:
		strs := e.svals
		if c.kind == cB {
			strs = e.bvals
		}
		for x := range enc {
			en := &enc[x]
			sp := en.s
			if c.kind == cB {
				sp = en.b
			}
			if k < sp.cnt {
				vals = append(vals, level(parquet.ByteArrayValue(unsafeBytes(strs[sp.off+k])), 0, c.maxDef, ci))
			} else {
				vals = append(vals, null)
			}
		}
	}
	return vals
}

// moreSep separates a row's items of more in its more_text value (ASCII
// RS, record separator). A file whose items hold it writes more instead.
const moreSep = 0x1e

// chooseMoreText reports whether more's items are written as more_text
// (records v7): joined by moreSep, one value a row, where that compresses
// smaller than the list's items, and no item holds moreSep. A row's items
// as one value, after one 4-byte length, repeat with their neighbours
// where each item after its own length does not: apt's term.log all in
// more 33,552 -> 31,077 bytes; a file of one or two short items a row can
// be smaller as the list (TestMoreText).
//
// Both forms are PLAIN, compressed at zstd's default level: at the
// column's own (best) level the choice cost 16% of a best-level encode's
// CPU, at the default 6%, and picked the same in 15 of the 16 files of
// the size table (in Spark's a smaller one). The list's levels, a
// repetition level an item, are counted as a bit an item: the written
// files differ by more than the values so compressed, by 0.03 to 0.6
// bytes an item in term.log, history.log, alternatives.log, dockerd.log
// and TestMoreText's lines.
//
// With always, only the items are looked at (tests).
func (e *encoder) chooseMoreText(rows []Row, order []int32, enc []encoded, always bool) bool {
	var items, joined []byte
	var one [4]byte
	nitems := 0
	for x, i := range order {
		its := e.moreItems(&rows[i], &enc[x])
		if len(its) == 0 {
			continue
		}
		nitems += len(its)
		start := len(joined)
		joined = append(joined, one[:]...)
		for n, it := range its {
			if strings.IndexByte(it.text, moreSep) >= 0 {
				return false
			}
			if n > 0 {
				joined = append(joined, moreSep)
			}
			joined = append(joined, it.text...)
			binary.LittleEndian.PutUint32(one[:], uint32(len(it.text)))
			items = append(items, one[:]...)
			items = append(items, it.text...)
		}
		binary.LittleEndian.PutUint32(joined[start:], uint32(len(joined)-start-4))
	}
	if always {
		return true
	}
	c := codec(zstd.SpeedDefault)
	zi, err := c.Encode(nil, items)
	if err != nil {
		return false
	}
	zj, err := c.Encode(nil, joined)
	return err == nil && len(zj) < len(zi)+nitems/8
}

// item is one value of more: a parameter's index and text.
type item struct {
	j    int32
	text string
}

// moreItems returns the row's values that have no column in this file, in
// parameter order: past the 32nd of their kind, or of a slot column the
// file leaves out (see demote).
func (e *encoder) moreItems(r *Row, en *encoded) []item {
	its := e.items[:0]
	for _, j := range e.midx[en.m.off : en.m.off+en.m.cnt] {
		its = append(its, item{j, r.Params[j]})
	}
	// A d item without its p column or one of its runs' n columns is
	// all in more, as its exact text.
	dits := e.dits[en.d.off : en.d.off+en.d.cnt]
	nn := en.n.cnt // the row's numeric parameters: its n values before the runs
	for _, d := range dits {
		nn -= int32(d.runs)
	}
	run := nn
	for _, d := range dits {
		col := d.s
		if e.u.right && rightAligned(en.s.cnt) {
			col = en.s.cnt - 1 - col
		}
		whole := e.u.p[col].n == 0
		for k := run; k < run+int32(d.runs); k++ {
			whole = whole || e.u.n[k] == 0
		}
		run += int32(d.runs)
		if whole {
			its = append(its, item{d.j, d.text})
		}
	}
	for k := int32(0); k < en.s.cnt; k++ {
		if e.u.p[k].n == 0 && !isDigits(dits, e.sj[en.s.off+k]) {
			its = append(its, item{e.sj[en.s.off+k], e.svals[en.s.off+k]})
		}
	}
	for k := int32(0); k < nn; k++ {
		if e.u.n[k] == 0 {
			j := e.nj[en.n.off+k]
			its = append(its, item{j, r.Params[j]})
		}
	}
	for k := int32(0); k < en.b.cnt; k++ {
		if e.u.b[k] == 0 {
			its = append(its, item{e.bj[en.b.off+k], e.bvals[en.b.off+k]})
		}
	}
	slices.SortFunc(its, func(a, b item) int { return cmp.Compare(a.j, b.j) })
	e.items = its
	return its
}

// isDigits reports whether parameter j is one of the d items dits.
func isDigits(dits []dItem, j int32) bool {
	for _, d := range dits {
		if d.j == j {
			return true
		}
	}
	return false
}

// hasSlots says whether the file has a slot column (p<j>, n<j> or b<j>).
func (u *usage) hasSlots() bool {
	for k := range MaxSlots {
		if u.p[k].n > 0 || u.n[k] > 0 || u.b[k] > 0 {
			return true
		}
	}
	return false
}

// nextSparse is the share of sparseSteps after o.slotMin: what encode's
// next trial would leave out below (o.slotMin when there is none).
func (e *encoder) nextSparse() float64 {
	for _, s := range sparseSteps {
		if s > e.o.slotMin {
			return s
		}
	}
	return e.o.slotMin
}

// demote leaves out the slot columns fewer than o.slotMin of the rows use:
// their values go to more. Writing a column costs every row a value, null
// or not; a column of a few values costs more than the list.
func (e *encoder) demote(rows int) {
	if e.o.slotMin <= 0 && e.o.slotRows <= 0 {
		return
	}
	min := max(1, e.o.slotRows, int(float64(rows)*e.o.slotMin))
	sparse := max(min, slotRowsSparse, int(float64(rows)*e.nextSparse()))
	for k := range MaxSlots {
		e.sparse = e.sparse || e.u.p[k].n >= min && e.u.p[k].n < sparse ||
			e.u.n[k] >= min && e.u.n[k] < sparse || e.u.b[k] >= min && e.u.b[k] < sparse
		if n := e.u.p[k].n; n > 0 && n < min {
			e.u.p[k] = strStats{}
			e.u.more = true
		}
		// An n column that holds another time of the line (kind w, y) is
		// never left out: as text in more it is a timestamp's bytes
		// again, in n<j> a small number, and a y item's times have no
		// text in more.
		if n := e.u.n[k]; n > 0 && n < min && e.u.nShift[k] == 0 {
			e.u.n[k] = 0
			e.u.more = true
		}
		if n := e.u.b[k]; n > 0 && n < min {
			e.u.b[k] = 0
			e.u.more = true
		}
	}
}

// appendRequired appends the values of a required integer column for the
// rows part. The values carry no levels or column index: a required
// column's buffer reads only the value (WriteRowValues).
func appendRequired(vals []parquet.Value, kind int, rows []Row, part []int32, millis bool) []parquet.Value {
	switch kind {
	case cWALSeq:
		for _, i := range part {
			vals = append(vals, parquet.Int64Value(int64(rows[i].WALSeq)))
		}
	case cIndex:
		for _, i := range part {
			vals = append(vals, parquet.Int32Value(int32(rows[i].Index)))
		}
	case cTS:
		unit := int64(1000)
		if millis {
			unit = 1e6
		}
		for _, i := range part {
			vals = append(vals, parquet.Int64Value(floorDiv(rows[i].TS, unit)))
		}
	case cTSSource:
		for _, i := range part {
			vals = append(vals, parquet.Int32Value(int32(rows[i].TSSource)))
		}
	case cTemplateID:
		for _, i := range part {
			vals = append(vals, parquet.Int64Value(int64(rows[i].TemplateID)))
		}
	case cDate:
		for _, i := range part {
			vals = append(vals, parquet.Int32Value(Day(rows[i].TS)))
		}
	case cVersion:
		for _, i := range part {
			vals = append(vals, parquet.Int32Value(int32(rows[i].TemplateVersion)))
		}
	}
	return vals
}

// appendCell appends the values of one row in column ci.
func (e *encoder) appendCell(vals []parquet.Value, c column, ci int, r *Row, en *encoded) []parquet.Value {
	{
		switch c.kind {
		case cWALSeq:
			vals = append(vals, level(parquet.Int64Value(int64(r.WALSeq)), 0, 0, ci))
		case cIndex:
			vals = append(vals, level(parquet.Int32Value(int32(r.Index)), 0, 0, ci))
		case cTS:
			vals = append(vals, level(parquet.Int64Value(floorDiv(r.TS, 1000)), 0, 0, ci))
		case cTemplateID:
			vals = append(vals, level(parquet.Int64Value(int64(r.TemplateID)), 0, 0, ci))
		case cVersion:
			vals = append(vals, level(parquet.Int32Value(int32(r.TemplateVersion)), 0, 0, ci))
		case cSource:
			vals = append(vals, parquet.ByteArrayValue(unsafeBytes(r.Source)))
		case cKinds:
			vals = append(vals, parquet.ByteArrayValue(unsafeBytes(en.kinds)))
		case cResidue:
			if len(en.residue) > 0 {
				vals = append(vals, level(parquet.ByteArrayValue(en.residue), 0, c.maxDef, ci))
			} else {
				vals = append(vals, level(parquet.NullValue(), 0, 0, ci))
			}
		case cMore:
			items := e.moreItems(r, en)
			for n, it := range items {
				vals = append(vals, level(parquet.ByteArrayValue(unsafeBytes(it.text)), min(n, 1), c.maxDef, ci))
			}
			if len(items) == 0 {
				vals = append(vals, level(parquet.NullValue(), 0, 0, ci))
			}
		case cMoreText:
			items := e.moreItems(r, en)
			if len(items) == 0 {
				vals = append(vals, level(parquet.NullValue(), 0, 0, ci))
				break
			}
			start := len(e.joined)
			for n, it := range items {
				if n > 0 {
					e.joined = append(e.joined, moreSep)
				}
				e.joined = append(e.joined, it.text...)
			}
			vals = append(vals, level(parquet.ByteArrayValue(e.joined[start:len(e.joined):len(e.joined)]), 0, c.maxDef, ci))
		case cAttrKey, cAttrValue:
			for n, a := range r.Attrs {
				s := a.Key
				if c.kind == cAttrValue {
					s = a.Value
				}
				vals = append(vals, level(parquet.ByteArrayValue(unsafeBytes(s)), min(n, 1), c.maxDef, ci))
			}
			if len(r.Attrs) == 0 {
				vals = append(vals, level(parquet.NullValue(), 0, 0, ci))
			}
		}
	}
	return vals
}

// stats computes the Delta stats of a file: wal_seq, ts, template_id,
// template_version, and date when the file has the column. Timestamps are
// ISO-8601 UTC with milliseconds; the maximum is rounded up to the next
// millisecond so it stays an upper bound.
func stats(rows []Row, date bool) string {
	cols := []string{colWALSeq, colTS, colTemplateID, colVersion}
	nulls := map[string]int64{}
	for _, c := range cols {
		nulls[c] = 0
	}
	mins, maxs := map[string]any{}, map[string]any{}
	if len(rows) > 0 {
		r0 := &rows[0]
		minSeq, maxSeq := r0.WALSeq, r0.WALSeq
		minTS, maxTS := floorDiv(r0.TS, 1000), floorDiv(r0.TS, 1000)
		minID, maxID := r0.TemplateID, r0.TemplateID
		minV, maxV := r0.TemplateVersion, r0.TemplateVersion
		for i := range rows[1:] {
			r := &rows[i+1]
			ts := floorDiv(r.TS, 1000)
			minSeq, maxSeq = min(minSeq, r.WALSeq), max(maxSeq, r.WALSeq)
			minTS, maxTS = min(minTS, ts), max(maxTS, ts)
			minID, maxID = min(minID, r.TemplateID), max(maxID, r.TemplateID)
			minV, maxV = min(minV, r.TemplateVersion), max(maxV, r.TemplateVersion)
		}
		mins[colWALSeq], maxs[colWALSeq] = int64(minSeq), int64(maxSeq)
		mins[colTS], maxs[colTS] = time.UnixMicro(minTS), time.UnixMicro(-floorDiv(-maxTS, 1000)*1000)
		mins[colTemplateID], maxs[colTemplateID] = int64(minID), int64(maxID)
		mins[colVersion], maxs[colVersion] = int32(minV), int32(maxV)
		if date {
			nulls[colDate] = 0
			mins[colDate] = DayString(Day(minTS * 1000))
			maxs[colDate] = DayString(Day(maxTS * 1000))
		}
	}
	return delta.StatsJSON(int64(len(rows)), mins, maxs, nulls)
}

// Day is the date column's value for a record time: days since
// 1970-01-01 of ts's UTC day.
func Day(tsNanos int64) int32 { return int32(floorDiv(tsNanos, int64(24*time.Hour))) }

// DayString is day (Day's value) as yyyy-mm-dd.
func DayString(day int32) string {
	return time.Unix(int64(day)*86400, 0).UTC().Format(time.DateOnly)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// choosePlain picks the encoding of each p<j> column that is not a
// dictionary, for a file written at zstd's best level (WithHighCompression:
// a file written once and kept, where the CPU is idle): PLAIN (each value
// after its 4-byte length) when its values so encoded compress smaller
// than DELTA_LENGTH_BYTE_ARRAY (every length, delta-packed, then the
// bytes), parquet-go's default, else that. Every Parquet reader reads
// both. The lengths bit-packed in a block of their own are noise to zstd;
// next to their values they repeat with them (a syslog header, a path of
// one shape), except where values of many lengths had matched across
// their boundaries. Each candidate column is compressed twice more, with
// the codec the column is written with (options.highCodec). docs/benchmarks.md, "Lake size: ...
// (size10c)".
func (e *encoder) choosePlain(enc []encoded) {
	c := e.o.highCodec()
	var src, plain, delta, z []byte
	var offs []uint32
	for k := range MaxSlots {
		s := &e.u.p[k]
		if s.n == 0 || s.dict(e.o) || s.bytes < e.o.rawBytes {
			continue
		}
		src, offs = src[:0], offs[:0]
		for x := range enc {
			if en := &enc[x]; int32(k) < en.s.cnt {
				offs = append(offs, uint32(len(src)))
				src = append(src, e.svals[en.s.off+int32(k)]...)
			}
		}
		offs = append(offs, uint32(len(src)))
		var err error
		if plain, err = parquet.Plain.EncodeByteArray(plain[:0], src, offs); err != nil {
			continue
		}
		if delta, err = deltaLen.EncodeByteArray(delta[:0], src, offs); err != nil {
			continue
		}
		if z, err = c.Encode(z[:0], plain); err != nil {
			continue
		}
		np := len(z)
		if z, err = c.Encode(z[:0], delta); err != nil {
			continue
		}
		s.plain = np < len(z)
	}
}

// chooseKinds picks, for a file written at zstd's best level, between a
// dictionary (from o.dictRows rows, the default) and PLAIN for the kinds
// column: both are encoded and compressed with the column's codec, and
// the smaller kept. Rows sorted by template repeat one kinds string over a
// template's rows, runs zstd takes as well from PLAIN text as from the
// dictionary's indexes, which are bit-packed at the width the dictionary's
// size needs (5 bits for Linux's 27 strings: fields that straddle bytes,
// noise to zstd); Loghub's BGL and OpenSSH keep the dictionary. Only for
// a file of one row group (encodeOnce). docs/benchmarks.md, "Lake size:
// byte-wide delta miniblocks".
func (e *encoder) chooseKinds(enc []encoded) {
	c := e.o.highCodec()
	var src, dsrc []byte
	offs, doffs := make([]uint32, 0, len(enc)+1), []uint32{0}
	index := make([]int32, len(enc))
	ids := map[string]int32{}
	var prev string
	var id int32 = -1
	for x := range enc {
		k := enc[x].kinds
		offs = append(offs, uint32(len(src)))
		src = append(src, k...)
		if id < 0 || k != prev {
			n, ok := ids[k]
			if !ok {
				n = int32(len(ids))
				ids[k] = n
				dsrc = append(dsrc, k...)
				doffs = append(doffs, uint32(len(dsrc)))
			}
			id, prev = n, k
		}
		index[x] = id
	}
	offs = append(offs, uint32(len(src)))
	size := func(b []byte, err error) int {
		if err != nil {
			return math.MaxInt
		}
		z, err := c.Encode(nil, b)
		if err != nil {
			return math.MaxInt
		}
		return len(z)
	}
	plain := size(parquet.Plain.EncodeByteArray(nil, src, offs))
	dict := size(parquet.Plain.EncodeByteArray(nil, dsrc, doffs))
	if dict < math.MaxInt {
		if n := size(parquet.RLEDictionary.EncodeInt32(nil, index)); n < math.MaxInt {
			dict += n
		} else {
			dict = n
		}
	}
	e.u.kindsPlain = plain < dict
}

// chooseDelta picks, for a file written at zstd's best level, between
// PLAIN and DELTA_BINARY_PACKED for the integer columns whose values have
// no order a rule could count on: ts and the n<j> (PLAIN otherwise), and
// date where it is no dictionary (DELTA otherwise). Each column's values
// are encoded both ways and compressed with the column's codec, and the
// smaller is kept: rows sorted by template interleave their times and days,
// where DELTA_BINARY_PACKED pays a block's widest jump for every value and
// PLAIN lets zstd find the repeated bytes; a counter or a slowly rising
// time is the other way round. Over the Loghub sets the files of Spark
// (n0, n2), HDFS and OpenSSH (ts), Linux (date, 44 days: 454 to 360 bytes)
// and Apache (n0) get smaller, 924 bytes, Spark 685 of them; HPC's date
// (545 days) stays DELTA: PLAIN 2,382 bytes, DELTA 2,111.
//
// template_id and template_version are tried the same way, PLAIN kept only
// where strictly smaller: rows in WAL order whose templates take turns
// (apt's term.log) repeat the ids' bytes for zstd in PLAIN. The 11 Loghub
// lakes of TestSizeLoghub 190,842 to 190,399 bytes of records, every one
// smaller; term.log 26,672 to 26,609.
func (e *encoder) chooseDelta(rows []Row, order []int32, enc []encoded) {
	c := e.o.highCodec()
	var plain, delta, z []byte
	sizes := func() (np, nd int) { // PLAIN's and DELTA's compressed sizes
		var err error
		if z, err = c.Encode(z[:0], plain); err != nil {
			return math.MaxInt, math.MaxInt
		}
		np = len(z)
		if z, err = c.Encode(z[:0], delta); err != nil {
			return math.MaxInt, math.MaxInt
		}
		return np, len(z)
	}
	smaller := func() bool { // DELTA smaller than PLAIN
		np, nd := sizes()
		return nd < np
	}
	plainSmaller := func() bool {
		np, nd := sizes()
		return np < nd
	}
	var v64 []int64
	var v32 []int32
	for _, i := range order {
		v64 = append(v64, int64(rows[i].TemplateID))
		v32 = append(v32, int32(rows[i].TemplateVersion))
	}
	plain, _ = parquet.Plain.EncodeInt64(plain[:0], v64)
	delta, _ = deltaEnc.EncodeInt64(delta[:0], v64)
	e.u.idPlain = plainSmaller()
	plain, _ = parquet.Plain.EncodeInt32(plain[:0], v32)
	delta, _ = deltaEnc.EncodeInt32(delta[:0], v32)
	e.u.versionPlain = plainSmaller()
	v64, v32 = v64[:0], v32[:0]
	if e.o.date && !e.u.fewDays && 4*len(rows) >= e.o.rawBytes {
		v32 = v32[:0]
		for _, i := range order {
			v32 = append(v32, Day(rows[i].TS))
		}
		plain, _ = parquet.Plain.EncodeInt32(plain[:0], v32)
		delta, _ = deltaEnc.EncodeInt32(delta[:0], v32)
		e.u.datePlain = !smaller()
	}
	if e.o.ints != "delta" {
		unit := int64(1000)
		if e.u.tsMillis {
			unit = 1e6
		}
		v64 = v64[:0]
		for _, i := range order {
			v64 = append(v64, floorDiv(rows[i].TS, unit))
		}
		plain, _ = parquet.Plain.EncodeInt64(plain[:0], v64)
		delta, _ = deltaEnc.EncodeInt64(delta[:0], v64)
		e.u.tsDelta = smaller()
		for k := range MaxSlots {
			if 8*e.u.n[k] < e.o.rawBytes {
				continue
			}
			v64 = v64[:0]
			for x := range enc {
				if en := &enc[x]; int32(k) < en.n.cnt {
					v64 = append(v64, e.nv[en.n.off+int32(k)])
				}
			}
			plain, _ = parquet.Plain.EncodeInt64(plain[:0], v64)
			delta, _ = deltaEnc.EncodeInt64(delta[:0], v64)
			e.u.nDelta[k] = smaller()
		}
	}
}
