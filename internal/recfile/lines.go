package recfile

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/eventtime"
	"github.com/quarrylake/quarry/streams"
)

// group is one row group's columns as read for the rows a projection
// keeps (readGroup), with what rendering a line needs looked up once.
type group struct {
	nrows int
	vals  []colVals
	base  [cDate + 1]*colVals // the columns that are not slots, by kind
	kept  []int32             // the kept rows, ascending; nil: every row
	// With lines: the slot columns read, by kind (0 p, 1 n, 2 b) and slot;
	// each kept row's template (an index into decoder.pieces); the parsed
	// kinds of each entry of a dictionary kinds column (and the error of
	// each that does not parse).
	slots    [3][MaxSlots]*colVals
	tpl      []int32
	kinds    [][]slot
	kindsErr []error // nil: every entry of kinds parsed
	// kind8, when not nil, is each row's entry of a dictionary kinds
	// column of at most 256 entries, one byte a row: the kinds column's
	// pages are given back (rendering reads a row's entry at random, a
	// cache line holds 64 of these against 16 int32 indexes).
	kind8 []uint8
	// needles are the needle searches of g's text columns made so far
	// (needleSearch).
	needles map[*Needle]*groupNeedle
}

// rows is how many rows g keeps; row(x) is the x-th.
func (g *group) rows() int {
	if g.kept != nil {
		return len(g.kept)
	}
	return g.nrows
}

func (g *group) row(x int) int {
	if g.kept != nil {
		return int(g.kept[x])
	}
	return x
}

// pos is row i's place in the WAL.
func (g *group) pos(i int) (uint64, uint32) {
	return uint64(g.base[cWALSeq].int(i)), uint32(g.base[cIndex].int(i))
}

// ts is row i's time in nanoseconds since the epoch.
func (g *group) ts(i int) int64 { return g.base[cTS].int(i) * g.base[cTS].c.unit }

// residue is row i's ts_residue, nil without one.
func (g *group) residue(i int) []byte {
	c := g.base[cResidue]
	if c == nil {
		return nil
	}
	if j := c.valueAt(i); j >= 0 {
		return c.str(j)
	}
	return nil
}

// prepareLines looks up, once per row group, what appendLine needs: the
// slot columns read and the template of each kept row. A kept row whose
// template version d.tpl lacks is a MissingTemplateError.
func (d *decoder) prepareLines(g *group) error {
	for i := range g.vals {
		cv := &g.vals[i]
		if !cv.read || cv.c.slot < 0 || cv.c.slot >= MaxSlots {
			continue
		}
		switch cv.c.kind {
		case cP:
			g.slots[0][cv.c.slot] = cv
		case cN:
			g.slots[1][cv.c.slot] = cv
		case cB:
			g.slots[2][cv.c.slot] = cv
		}
	}
	ids, vers := g.base[cTemplateID], g.base[cVersion]
	g.tpl = make([]int32, g.nrows)
	var last Key
	ix := int32(-1)
	for x := range g.rows() {
		i := g.row(x)
		// Rows come by template: one lookup per run.
		if k := (Key{uint64(ids.int(i)), uint32(vers.int(i))}); ix < 0 || k != last {
			var ok bool
			if ix, ok = d.tplIndex[k]; !ok {
				text, found := d.tpl[k]
				if !found {
					seq, idx := g.pos(i)
					return fmt.Errorf("records wal %d index %d: %w", seq, idx, &MissingTemplateError{Key: k})
				}
				ix = int32(len(d.pieces))
				d.pieces = append(d.pieces, strings.Split(text, Wildcard))
				d.keys = append(d.keys, k)
				d.tplIndex[k] = ix
			}
			last = k
		}
		g.tpl[i] = ix
	}
	if kc := g.base[cKinds]; kc.dict != nil && g.kinds == nil {
		// Every entry parsed here, once (needleRows calls this before
		// the other columns are read, and readGroup again after), so
		// rendering only reads g.kinds and LineRenderers may render g's
		// rows at once; an entry that does not parse is an error only for
		// the rows that use it.
		g.kinds = make([][]slot, len(kc.dict))
		for e, v := range kc.dict {
			s, err := parsedKinds(d.kinds, v)
			if err != nil {
				if g.kindsErr == nil {
					g.kindsErr = make([]error, len(kc.dict))
				}
				g.kindsErr[e] = err
			}
			g.kinds[e] = s
		}
		if len(kc.dict) <= 256 {
			g.kind8 = make([]uint8, len(kc.idx))
			for i, e := range kc.idx {
				g.kind8[i] = uint8(e)
			}
			for _, p := range kc.pages {
				parquet.Release(p)
			}
			if kc.pooled {
				putSlice(kc.idx)
			}
			kc.idx, kc.pages = nil, nil
		}
	}
	return nil
}

// runs appends the values of row i's digit runs of d item s to dst; false
// when one has no value.
func (g *group) runs(dst []int64, i int, s slot) ([]int64, bool) {
	for k := s.nrun; k < s.nrun+s.runs; k++ {
		cv := g.slots[1][k]
		if cv == nil {
			return dst, false
		}
		v := cv.valueAt(i)
		if v < 0 {
			return dst, false
		}
		dst = append(dst, cv.int(v))
	}
	return dst, true
}

// slotValue is the column that holds row i's value of slot s in g and the
// value's index in it (-1 when the row has none, nil when there is no
// column: a parameter's exact text is then the next item of more): p<col>
// for text (and the skeleton of digit runs, whose runs group.runs reads),
// the next n column for a number or another time, the next b column for
// bytes. kn and kb count the n and b columns a row's slots took so far,
// left to right (the other times inside a text take theirs): every reader
// of a row's parameters (appendLineWith, Lines.MayHold) walks its slots
// through it. Not for kindTime and kindCovered, which read no column.
func (g *group) slotValue(s slot, i int, kn, kb *int) (*colVals, int) {
	var cv *colVals
	switch s.kind {
	case kindDigits, kindInnerD:
		if s.col < MaxSlots {
			cv = g.slots[0][s.col]
		}
	case kindString, kindInner, kindInnerW:
		*kn += len(s.shifts)
		if s.col < MaxSlots {
			cv = g.slots[0][s.col]
		}
	case kindBytes:
		if *kb < MaxSlots {
			cv = g.slots[2][*kb]
		}
		*kb++
	default:
		if *kn < MaxSlots {
			cv = g.slots[1][*kn]
		}
		*kn++
	}
	if cv == nil {
		return nil, -1
	}
	return cv, cv.valueAt(i)
}

// appendDigits appends the text of row i's slot s of kind d or v (for v,
// the text around its timestamp): the skeleton in p<col> with each run
// marker replaced by its run's value (runs is scratch for the values).
// ok is false when the row has no skeleton or a run lacks its value: the
// parameter's exact text is then the next item of more.
func (g *group) appendDigits(dst []byte, s slot, i int, runs *[]int64) (out []byte, ok bool, err error) {
	var kn, kb int // a d item takes no n or b column of its own
	cv, v := g.slotValue(s, i, &kn, &kb)
	if v < 0 {
		return dst, false, nil
	}
	if *runs, ok = g.runs((*runs)[:0], i, s); !ok {
		return dst, false, nil
	}
	if dst, ok = appendRuns(dst, cv.str(v), *runs); !ok {
		return dst, false, fmt.Errorf("%d runs do not match its text", s.runs)
	}
	return dst, true, nil
}

// slotsOf is row i's kinds, parsed.
func (d *decoder) slotsOf(g *group, i int) ([]slot, error) {
	return slotsIn(g, i, d.kinds, len(d.pieces[g.tpl[i]])-1)
}

// slotsIn is row i's kinds, parsed: a dictionary column's from g.kinds, a
// plain column's through the cache kinds. wild is the wildcards of the
// row's template: an empty kinds value on a row of a template with
// wildcards is that many s items (records v8, stringSlots).
func slotsIn(g *group, i int, kinds map[string][]slot, wild int) ([]slot, error) {
	e, ok := g.kindsEntry(i)
	var s []slot
	if !ok {
		var err error
		if s, err = parsedKinds(kinds, g.base[cKinds].str(i)); err != nil {
			return nil, err
		}
	} else {
		if g.kindsErr != nil && g.kindsErr[e] != nil {
			return nil, g.kindsErr[e]
		}
		s = g.kinds[e]
	}
	if len(s) == 0 && wild > 0 {
		return stringSlots(wild)
	}
	return s, nil
}

// stringSlots is wild s items parsed: what an empty kinds value stands for
// on a row of a template with wild wildcards (records v8). The encoder
// writes it where every parameter of the row is an s item, or every one is
// in more (where s, i, f, a, x and b items all render their item's text):
// in a file of lines without timestamps most rows' kinds are s items only,
// and a value a row that only says how many wildcards its template has
// cost apt's term.log 3.3% of its records file (docs/formats.md).
func stringSlots(wild int) ([]slot, error) {
	if wild < len(stringSlotsCache) {
		if p := stringSlotsCache[wild].Load(); p != nil {
			return *p, nil
		}
	}
	s, err := shared.parsed(strings.Repeat(string(rune(kindString)), wild))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if wild < len(stringSlotsCache) {
		stringSlotsCache[wild].Store(&s)
	}
	return s, nil
}

// stringSlotsCache holds stringSlots(n) by n, once parsed: it is asked a
// row, by renderers at once.
var stringSlotsCache [256]atomic.Pointer[[]slot]

// kindsEntry is row i's entry of a dictionary kinds column (g.kinds);
// false when the column is plain (its value is then parsed through a
// cache).
func (g *group) kindsEntry(i int) (int32, bool) {
	if g.kind8 != nil {
		return int32(g.kind8[i]), true
	}
	if kc := g.base[cKinds]; kc.dict != nil {
		return kc.idx[i], true
	}
	return 0, false
}

// parsedKinds parses a kinds value, once per distinct value (cache holds
// those this decoder or renderer parsed; shared, those of the process).
func parsedKinds(cache map[string][]slot, kinds []byte) ([]slot, error) {
	if s, ok := cache[string(kinds)]; ok {
		return s, nil
	}
	s, err := shared.parsed(string(kinds))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	cache[string(kinds)] = s
	return s, nil
}

// shared holds the kinds values every decoder of the process parsed: the
// files of a lake repeat them (a version's kinds in each file it has rows
// in), and so do the searches of a long-running reader (quarry serve). A
// parsed value is never written after parseKinds returns it, so decoders
// read one at once. Errors are not kept.
var shared = kindsCache{m: map[string][]slot{}}

// maxSharedKinds bounds shared: past it, it starts over.
const maxSharedKinds = 1 << 16

type kindsCache struct {
	mu sync.RWMutex
	m  map[string][]slot
}

// slotScratch holds the slices parsed parses into.
var slotScratch = sync.Pool{New: func() any { return new([]slot) }}

// parsed returns kinds parsed, from c when it is there.
func (c *kindsCache) parsed(kinds string) ([]slot, error) {
	c.mu.RLock()
	s, ok := c.m[kinds]
	c.mu.RUnlock()
	if ok {
		return s, nil
	}
	// Parsed into a scratch slice, then copied once at its length
	// (appending from nil grew it a few times: a seventh of the bytes a
	// term allocated).
	sp := slotScratch.Get().(*[]slot)
	defer slotScratch.Put(sp)
	s, err := parseKinds((*sp)[:0], kinds)
	*sp = s[:0]
	if err != nil {
		return nil, err
	}
	s = append(make([]slot, 0, len(s)), s...) // a template without wildcards: not nil, so it is kept
	c.mu.Lock()
	if len(c.m) >= maxSharedKinds {
		clear(c.m)
	}
	c.m[kinds] = s
	c.mu.Unlock()
	return s, nil
}

// appendLine appends the line of row r of g to dst, byte for byte as it
// was read: the template's pieces and the row's parameters, each as its
// kind says (the package doc's reconstruction). It is the one renderer of
// records v3 lines: records (DecodeProjected, DecodeRows) and Lines use it.
// With d.bounds set it records where each parameter item's text starts in
// dst (one entry per item that is not covered) and where the last piece
// starts. r carries the row's template (g.tpl read at random is a cache
// miss a row) and its place in the WAL (g's wal_seq and record_index are
// gone: dropKeys).
func (d *decoder) appendLine(dst []byte, g *group, r lineRef) ([]byte, error) {
	return d.appendLineWith(dst, g, r, &d.times, d.kinds)
}

// appendLineWith is appendLine with the caches of a renderer: times
// renders the timestamps, kinds holds a plain kinds column's values
// parsed. It writes nothing of d or g but d.bounds (when set), so
// renderers with caches of their own may render rows of one decoder at
// once (LineRenderer).
func (d *decoder) appendLineWith(dst []byte, g *group, r lineRef, times *eventtime.Renderer, kinds map[string][]slot) ([]byte, error) {
	i := int(r.row)
	pieces := d.pieces[r.tpl]
	slots, err := slotsIn(g, i, kinds, len(pieces)-1)
	if err != nil {
		return nil, err
	}
	if len(slots) != len(pieces)-1 {
		return nil, fmt.Errorf("%w: record wal %d index %d: %d kinds for %d wildcards", ErrCorrupt, r.seq, r.idx, len(slots), len(pieces)-1)
	}
	more := g.moreOf(i)
	ts := time.UnixMicro(g.ts(i) / 1000)
	var kn, kb int // the next n and b column (p: the slot's col)
	var runs []int64
	for j, s := range slots {
		if s.kind == kindCovered {
			continue
		}
		dst = append(dst, pieces[j]...)
		if d.bounds != nil {
			d.bounds = append(d.bounds, len(dst))
		}
		var cv *colVals
		v := -1
		switch s.kind {
		case kindTime:
			dst = times.Render(dst, ts, s.layout, g.residue(i))
			continue
		case kindDigits, kindInnerD:
			// The skeleton in p<col> and every run in its n column, or
			// the parameter's text in more.
			start := len(dst)
			var ok bool
			if dst, ok, err = g.appendDigits(dst, s, i, &runs); err != nil {
				return nil, fmt.Errorf("%w: record wal %d index %d: parameter %d: %w", ErrCorrupt, r.seq, r.idx, j, err)
			}
			if ok {
				if s.kind == kindInnerD {
					if start+s.offset > len(dst) {
						return nil, fmt.Errorf("%w: record wal %d index %d: parameter %d: time offset %d past its text", ErrCorrupt, r.seq, r.idx, j, s.offset)
					}
					// The timestamp after the text, then turned into place.
					at, end := start+s.offset, len(dst)
					dst = times.Render(dst, ts, s.layout, g.residue(i))
					slices.Reverse(dst[at:end])
					slices.Reverse(dst[end:])
					slices.Reverse(dst[at:])
				}
				continue
			}
		default:
			cv, v = g.slotValue(s, i, &kn, &kb)
		}
		var text []byte
		switch {
		case v >= 0 && cv.c.kind == cN && s.kind == kindShift:
			dst = times.Render(dst, shifted(g.ts(i), s.layout, s.res, cv.int(v)), s.layout, s.res)
			continue
		case v >= 0 && cv.c.kind == cN:
			dst = appendValue(dst, s, cv.int(v))
			continue
		case v >= 0:
			text = cv.str(v)
		case more.left():
			// No column value: the parameter's exact text is the next
			// item of more.
			text = more.next()
		case s.kind == kindInner || s.kind == kindInnerD || s.kind == kindInnerW:
			return nil, fmt.Errorf("%w: record wal %d index %d: parameter %d of kind %c has no text", ErrCorrupt, r.seq, r.idx, j, s.kind)
		default:
			return nil, fmt.Errorf("%w: record wal %d index %d: parameter %d of kind %c has no value", ErrCorrupt, r.seq, r.idx, j, s.kind)
		}
		if s.kind == kindInnerW {
			if dst, err = appendInnerTimes(dst, text, s, g, i, ts, times); err != nil {
				return nil, fmt.Errorf("%w: record wal %d index %d: parameter %d: %w", ErrCorrupt, r.seq, r.idx, j, err)
			}
			continue
		}
		if s.kind == kindInner || s.kind == kindInnerD {
			if s.offset > len(text) {
				return nil, fmt.Errorf("%w: record wal %d index %d: parameter %d: time offset %d past its text", ErrCorrupt, r.seq, r.idx, j, s.offset)
			}
			dst = append(dst, text[:s.offset]...)
			dst = times.Render(dst, ts, s.layout, g.residue(i))
			dst = append(dst, text[s.offset:]...)
			continue
		}
		dst = append(dst, text...)
	}
	if more.left() {
		return nil, fmt.Errorf("%w: record wal %d index %d: %d values left in more", ErrCorrupt, r.seq, r.idx, more.count())
	}
	if d.bounds != nil {
		d.bounds = append(d.bounds, len(dst))
	}
	return append(dst, pieces[len(pieces)-1]...), nil
}

// record fills rec with row r of g: the fields d.proj asks for, the line
// cut from the decoder's arena.
func (d *decoder) record(rec *Record, g *group, r lineRef) error {
	p := d.proj
	b := &g.base
	i := int(r.row)
	key := d.key(g, r)
	*rec = Record{TemplateID: key.ID, TemplateVersion: key.Version, TS: g.ts(i), WALSeq: r.seq, Index: r.idx}
	if c := b[cTSSource]; c != nil && c.read {
		rec.TSSource = streams.TSSource(c.int(i))
	}
	if p == nil || p.Source {
		rec.Source = d.internAt(b[cSource], i)
	}
	if ck, cv := b[cAttrKey], b[cAttrValue]; (p == nil || p.Attrs) && (ck != nil || cv != nil) {
		var keys, vals [][]byte
		if ck != nil && cv != nil {
			keys, vals = ck.listAt(i), cv.listAt(i)
		}
		if ck == nil || cv == nil || len(keys) != len(vals) {
			return fmt.Errorf("%w: attribute keys and values do not pair", ErrCorrupt)
		}
		for j := range keys {
			rec.Attrs = append(rec.Attrs, streams.Attr{Key: string(keys[j]), Value: string(vals[j])})
		}
	}
	if p != nil && !p.Lines {
		return nil
	}
	if cap(d.line)-len(d.line) < 4<<10 {
		d.line = make([]byte, 0, 256<<10)
	}
	line, err := d.appendLine(d.line[len(d.line):], g, r)
	if err != nil {
		return err
	}
	if cap(line) != cap(d.line)-len(d.line) {
		d.line = line[len(line):] // outgrew the arena: continue in the new array
	} else {
		d.line = d.line[:len(d.line)+len(line)]
	}
	rec.Line = line[:len(line):len(line)]
	return nil
}

// Lines are the rows of a records file a projection keeps, in WAL order
// (wal_seq, record_index) unless it asks for the file's order, with their
// columns decoded and no line rendered: AppendLine renders a row's line
// into the caller's buffer, so a reader that writes lines (raw output)
// builds no Record per row. Record builds one where a reader needs it.
type Lines struct {
	d      *decoder
	groups []*group
	refs   []lineRef
	// rank is the index in refs of each row in the file's stored order
	// (the order of groups and their rows); nil: refs are in that order.
	rank []int32
}

// lineRef is a row: its place in the WAL, its row group (an index into
// Lines.groups) and row, and its template version (an index into
// decoder.keys; -1 without the projection's Lines). One array: putting
// rows in WAL order reads each once, at random, and a reader going through
// them in that order finds each row's template without reading its row
// group's columns at random (the field fills what was padding).
type lineRef struct {
	seq    uint64
	idx    uint32
	g, row int32
	tpl    int32
}

// Len is the number of rows.
func (l *Lines) Len() int { return len(l.refs) }

// Pos is row x's place in the WAL.
func (l *Lines) Pos(x int) (uint64, uint32) { return l.refs[x].seq, l.refs[x].idx }

// TS is row x's event time, in nanoseconds since the epoch.
func (l *Lines) TS(x int) int64 {
	r := l.refs[x]
	return l.groups[r.g].ts(int(r.row))
}

// Key is row x's template version.
func (l *Lines) Key(x int) Key {
	r := l.refs[x]
	return l.d.key(l.groups[r.g], r)
}

// key is row r of g's template version: from its template index (with
// the projection's Lines), else from g's columns.
func (d *decoder) key(g *group, r lineRef) Key {
	if r.tpl >= 0 {
		return d.keys[r.tpl]
	}
	b := &g.base
	return Key{uint64(b[cTemplateID].int(int(r.row))), uint32(b[cVersion].int(int(r.row)))}
}

// Keys are the template versions of l's rows, each once, and KeyIndex(x)
// is row x's in it: a reader that decides by template looks the versions
// up once, not once a row. They need the projection's Lines.
func (l *Lines) Keys() []Key { return l.d.keys }

// KeyIndex is the index in Keys of row x's template version.
func (l *Lines) KeyIndex(x int) int { return int(l.refs[x].tpl) }

// AppendLine appends row x's line to dst (without a newline). It needs the
// projection's Lines.
func (l *Lines) AppendLine(dst []byte, x int) ([]byte, error) {
	r := l.refs[x]
	return l.d.appendLine(dst, l.groups[r.g], r)
}

// A LineRenderer renders lines of Lines as AppendLine does, with caches of
// its own (the timestamps' text, a plain kinds column's values parsed):
// LineRenderers in several goroutines may render rows of the same Lines at
// once, so long as nothing else uses those Lines meanwhile (AppendLine,
// Record and Release write their decoder's caches). The zero value is
// ready to use; one LineRenderer is one goroutine's.
type LineRenderer struct {
	times   eventtime.Renderer
	kinds   map[string][]slot
	scratch [][]byte // AppendLines' lines in stored order, in chunks
	stored  []int32  // their indexes in the run
	// secs renders AppendLines' timestamps, one Renderer a second (by its
	// low bits): rows in stored order revisit the seconds of a run one
	// template after another, which one Renderer's one second misses.
	secs *[256]eventtime.Renderer
}

// AppendLine appends row x of l's line to dst (without a newline), byte
// for byte as l.AppendLine does. It needs the projection's Lines.
func (r *LineRenderer) AppendLine(dst []byte, l *Lines, x int) ([]byte, error) {
	if r.kinds == nil {
		r.kinds = map[string][]slot{}
	}
	ref := l.refs[x]
	return l.d.appendLineWith(dst, l.groups[ref.g], ref, &r.times, r.kinds)
}

// Record fills rec with row x as DecodeProjected returns it.
func (l *Lines) Record(rec *Record, x int) error {
	r := l.refs[x]
	return l.d.record(rec, l.groups[r.g], r)
}

// dropKeys gives the pages of g's wal_seq, record_index, template_id and
// template_version columns back to parquet-go's pools once its rows'
// lineRefs (which carry their place in the WAL and template) are built, so
// the next row group decodes into them: a full render's four largest
// integer columns are not all held until its end (about 20 of 85 MB of
// page memory, for 500,000 rows). Nothing reads those columns after.
func (g *group) dropKeys() {
	for _, k := range []int{cWALSeq, cIndex, cTemplateID, cVersion} {
		cv := g.base[k]
		for _, p := range cv.pages {
			parquet.Release(p)
		}
		cv.free()
	}
}

// Release gives the buffers of the pages l's columns point into back to
// parquet-go's pools, so that the next file decodes into memory already in
// use (a drained file's pages were a third of a full render's fresh
// memory). After it only Len and Pos answer: l's columns are gone. What l
// returned before (Records, lines appended to a caller's buffer) holds no
// page memory.
func (l *Lines) Release() {
	for _, g := range l.groups {
		g.release()
	}
	l.groups, l.rank = nil, nil
}

// records returns every row as a Record, in l's order, but those
// d.proj.Needle rules out.
func (l *Lines) records() ([]Record, error) {
	var needles []*Needle // by KeyIndex
	if l.d.proj != nil && l.d.proj.Needle != nil && len(l.d.keys) > 0 {
		nf := l.d.proj.Needle
		needles = make([]*Needle, len(l.d.keys))
		for i, k := range l.d.keys {
			needles[i] = nf(k)
		}
	}
	out := make([]Record, len(l.refs))
	n := 0
	var scratch []byte
	for x := range out {
		if needles != nil && l.refs[x].tpl >= 0 {
			if nd := needles[l.refs[x].tpl]; nd != nil {
				var ok bool
				if ok, scratch = l.MayHold(x, nd, scratch); !ok {
					continue
				}
			}
		}
		if err := l.Record(&out[n], x); err != nil {
			return nil, err
		}
		n++
	}
	return out[:n], nil
}

// DecodeLines is DecodeProjected's rows as Lines: the same rows, in the
// same order, nothing rendered yet. ts_source is not read: Lines.Record
// leaves TSSource zero.
func (r *Reader) DecodeLines(tpl Templates, p Projection) (*Lines, error) {
	return decodeLinesOf(r.f, r, tpl, p, false)
}

func newDecoder(tpl Templates, p *Projection) *decoder {
	return &decoder{tpl: tpl, proj: p, tplIndex: map[Key]int32{}, kinds: map[string][]slot{}, strs: map[string]string{}}
}

// decodeLines reads the row groups of f that hold rows p keeps (through r
// when it is not nil: only the column chunks they need) and orders the
// kept rows.
func decodeLines(f *parquet.File, r *Reader, tpl Templates, p Projection) (*Lines, error) {
	return decodeLinesOf(f, r, tpl, p, true)
}

// decodeLinesOf is decodeLines, reading ts_source with tsSource.
func decodeLinesOf(f *parquet.File, r *Reader, tpl Templates, p Projection, tsSource bool) (*Lines, error) {
	cols := columnsOf(f.Schema())
	d := newDecoder(tpl, &p)
	d.noTSSource = !tsSource
	skip := rowGroupSkipper(f, cols, d)
	n, whole, err := keptRows(f, d)
	if err != nil {
		return nil, err
	}
	// A damaged footer may claim any number of rows: a real file spends
	// bytes on each.
	n = min(n, f.Size())
	if p.Needle != nil {
		// The needle search drops most rows of the versions it keeps as
		// it reads them (a needle is in a few lines): the refs are sized
		// for the rows of the versions without a needle, which are all
		// kept, and grow as the needle's rows come, not sized and cleared
		// for every row of its versions (a twelfth of a needle's CPU
		// through quarry serve). Sized for 1,024 only, a full render
		// (every version without a needle) grew them by doubling, 59 MB
		// allocated for 12 MB of refs over the bench lake.
		n = min(n, whole+1024)
	}
	l := &Lines{d: d, refs: make([]lineRef, 0, n)}
	meta := f.Metadata().RowGroups
	arena := arenas.Get().(*[]byte) // the row groups' chunks, one after another
	defer arenas.Put(arena)
	for i, rg := range f.RowGroups() {
		if skipped, err := skip(i, rg); err != nil {
			return nil, err
		} else if skipped {
			continue
		}
		if i < len(meta) {
			if err := checkGroupRows(&meta[i]); err != nil {
				return nil, err
			}
		}
		if r != nil && i < len(meta) {
			d.src = source{r: r.r, size: r.size, meta: &meta[i], arena: arena}
		}
		g, err := d.readGroup(rg, cols)
		if err != nil {
			return nil, err
		}
		if g == nil {
			continue
		}
		gi := int32(len(l.groups))
		l.groups = append(l.groups, g)
		for x := range g.rows() {
			i := g.row(x)
			seq, idx := g.pos(i)
			tpl := int32(-1)
			if g.tpl != nil {
				tpl = g.tpl[i]
			}
			l.refs = append(l.refs, lineRef{seq, idx, gi, int32(i), tpl})
		}
		if g.tpl != nil {
			g.dropKeys()
		}
	}
	if !p.FileOrder {
		l.walOrder()
	}
	return l, nil
}

// WALOrdered returns sel, rows of l (decoded with FileOrder), in
// (wal_seq, record_index) order: a reader that selects few of a file's
// rows orders those only, not every row it decoded.
func (l *Lines) WALOrdered(sel []int32) []int32 {
	order := walPerm(len(sel), func(i int) (uint64, uint32) { return l.Pos(int(sel[i])) })
	if order == nil {
		return sel
	}
	out := make([]int32, len(sel))
	for x, i := range order {
		out[x] = sel[i]
	}
	return out
}

// walOrder puts l's rows in (wal_seq, record_index) order, in place:
// following each cycle of the permutation moves every row once, and no
// second array of rows is allocated. The permutation's array becomes
// l.rank: each row's place, written as the cycle goes on.
func (l *Lines) walOrder() {
	refs := l.refs
	order := walPerm(len(refs), func(i int) (uint64, uint32) { return refs[i].seq, refs[i].idx })
	for i := range order {
		if order[i] < 0 {
			continue // placed, in a cycle already followed
		}
		// Row x's place gets the row at order[x]; once read, order[x] < 0
		// marks it done and holds -1 - the place row x went to (prev; the
		// cycle's first row's, x, when it closes).
		first := refs[i]
		x, prev := i, -1
		for {
			from := int(order[x])
			if prev >= 0 {
				order[x] = int32(-1 - prev)
			}
			if from == i {
				refs[x] = first
				order[i] = int32(-1 - x)
				break
			}
			refs[x] = refs[from]
			prev, x = x, from
		}
	}
	for j := range order {
		order[j] = -1 - order[j]
	}
	l.rank = order
}

// Selected is rows of Lines cut into runs to render (LineRenderer.
// AppendLines), which several renderers may render at once: each run's
// rows listed in the file's stored order.
type Selected struct {
	l    *Lines
	rows int     // a run's rows (the last may hold fewer)
	n    int     // rows selected
	at   []int32 // per run, its rows' indexes in stored order (l.rank's), ascending
	k    []int32 // and their indexes in sel
}

// Select cuts sel, rows of l in the order their lines are to be written
// (each row once), into runs of rows rows to render: run r is sel[r*rows:
// (r+1)*rows]. l must not be released before its runs are rendered.
func (l *Lines) Select(sel []int32, rows int) *Selected {
	s := &Selected{l: l, rows: max(rows, 1), n: len(sel), at: make([]int32, len(sel)), k: make([]int32, len(sel))}
	// pick[x] is row x's index in sel (-1: not in it); nil: sel is every
	// row in l's order.
	var pick []int32
	every := len(sel) == len(l.refs)
	for k := 0; every && k < len(sel); k++ {
		every = sel[k] == int32(k)
	}
	if !every {
		pick = make([]int32, len(l.refs))
		for x := range pick {
			pick[x] = -1
		}
		for k, x := range sel {
			pick[x] = int32(k)
		}
	}
	next := make([]int, s.Runs()) // where the next row of each run goes
	for r := range next {
		next[r] = r * s.rows
	}
	for j := range l.refs {
		k := j
		if l.rank != nil {
			k = int(l.rank[j])
		}
		if pick != nil {
			if k = int(pick[k]); k < 0 {
				continue
			}
		}
		r := k / s.rows
		s.at[next[r]], s.k[next[r]] = int32(j), int32(k)
		next[r]++
	}
	return s
}

// Runs is how many runs s holds.
func (s *Selected) Runs() int { return (s.n + s.rows - 1) / s.rows }

// Run is the rows of sel run r holds: [a, b).
func (s *Selected) Run(r int) (a, b int) { return r * s.rows, min((r+1)*s.rows, s.n) }

// AppendLines appends the lines of run run of s, each followed by a
// newline, to dst in sel's order, and returns dst and ends, ends[k] being
// where the run's line k ends in dst. The rows are rendered in the file's
// stored order (template by template: each column is read front to back,
// not at random as in WAL order) into the renderer's scratch, and each
// line is then copied to its place: the more rows a run holds, the more
// of a template's rows lie next to each other. It needs the projection's
// Lines.
func (r *LineRenderer) AppendLines(dst []byte, ends []int, s *Selected, run int) ([]byte, []int, error) {
	if r.kinds == nil {
		r.kinds = map[string][]slot{}
	}
	if r.secs == nil {
		r.secs = new([256]eventtime.Renderer)
	}
	l := s.l
	a, b := s.Run(run)
	ends = slices.Grow(ends[:0], b-a)[:b-a]
	stored := r.stored[:0] // the run's indexes (k-a) in stored order
	c := 0                 // the scratch chunk being filled
	r.chunk(c)
	gi, first := 0, 0 // the row group of the row, the stored index of its first row
	for t, j := range s.at[a:b] {
		for int(j) >= first+l.groups[gi].rows() {
			first += l.groups[gi].rows()
			gi++
		}
		g := l.groups[gi]
		k := int(s.k[a+t]) - a
		if cap(r.scratch[c])-len(r.scratch[c]) < 4<<10 {
			c++
			r.chunk(c)
		}
		i := g.row(int(j) - first)
		line := r.scratch[c]
		start := len(line)
		times := &r.secs[uint64(g.ts(i)/1e9)%uint64(len(r.secs))]
		var err error
		if line, err = l.d.appendLineWith(line, g, lineRef{g: int32(gi), row: int32(i), tpl: g.tpl[i]}, times, r.kinds); err != nil {
			x := int(j)
			if l.rank != nil {
				x = int(l.rank[j])
			}
			// Again with the row's place in the WAL, for the error.
			_, err = l.d.appendLineWith(line, g, l.refs[x], times, r.kinds)
			r.stored = stored
			return dst, ends, err
		}
		line = append(line, '\n')
		r.scratch[c] = line // a line longer than a chunk moved line to an array of its own
		ends[k] = len(line) - start
		stored = append(stored, int32(k))
	}
	r.stored = stored
	at := len(dst)
	for k, n := range ends {
		at += n
		ends[k] = at
	}
	base := len(dst)
	dst = slices.Grow(dst, at-base)[:at]
	c, src := 0, 0
	for _, k := range stored {
		start := base
		if k > 0 {
			start = ends[k-1]
		}
		if src == len(r.scratch[c]) {
			c, src = c+1, 0
		}
		src += copy(dst[start:ends[k]], r.scratch[c][src:])
	}
	return dst, ends, nil
}

// chunk empties scratch chunk c, making it when r has not got it.
func (r *LineRenderer) chunk(c int) {
	if c == len(r.scratch) {
		r.scratch = append(r.scratch, make([]byte, 0, 1<<20))
	}
	r.scratch[c] = r.scratch[c][:0]
}

// appendInnerTimes appends the text of y item s of row i of g: text (its
// p value, or more's) with the line's timestamp and its other times (n
// values) inserted at their offsets, in order of offset.
func appendInnerTimes(dst, text []byte, s slot, g *group, i int, ts time.Time, times *eventtime.Renderer) ([]byte, error) {
	start, x, tsDone := len(dst), 0, false
	for !tsDone || x < len(s.shifts) {
		off, t, l, res := s.offset, ts, s.layout, g.residue(i)
		if tsDone || x < len(s.shifts) && s.shifts[x].offset < s.offset {
			a := s.shifts[x]
			var cv *colVals
			if c := s.nrun + x; c < MaxSlots {
				cv = g.slots[1][c]
			}
			v := -1
			if cv != nil && cv.c.kind == cN {
				v = cv.valueAt(i)
			}
			if v < 0 {
				return nil, fmt.Errorf("time %d of kind y has no value", x)
			}
			off, t, l, res = a.offset, shifted(g.ts(i), a.layout, a.residue, cv.int(v)), a.layout, a.residue
			x++
		} else {
			tsDone = true
		}
		need := off - (len(dst) - start)
		if need < 0 || need > len(text) {
			return nil, fmt.Errorf("time offset %d past its text", off)
		}
		dst = append(dst, text[:need]...)
		text = text[need:]
		dst = times.Render(dst, t, l, res)
	}
	return append(dst, text...), nil
}
