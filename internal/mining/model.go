package mining

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// slot is one token position of a template.
type slot struct {
	start, end int32 // literal text is cluster.line[start:end]
	kind       tokKind
	param      bool
	prefix     int32 // param: length of a literal id prefix ("core." of "core.<*>")
	mask       uint8 // param: 1 + index of the tenant's mask that made it; 0 if none
}

// pre returns the literal prefix of slot s of c.
func (c *cluster) pre(s *slot) string { return c.line[s.start : s.start+s.prefix] }

// idPrefixLen returns the length of the literal prefix of a variable token:
// two or more letters and one separator ('.', '-', '_') followed by a digit
// or a signed digit, as in "core.1234", "node-12", "blk_-42"; else 0.
func idPrefixLen(w string) int32 {
	i := 0
	for i < len(w) && (w[i]|0x20 >= 'a' && w[i]|0x20 <= 'z') {
		i++
	}
	if i < 2 || i+1 >= len(w) || (w[i] != '.' && w[i] != '-' && w[i] != '_') {
		return 0
	}
	r := w[i+1:]
	if isDigit(r[0]) || (r[0] == '-' || r[0] == '+') && len(r) > 1 && isDigit(r[1]) {
		return int32(i + 1)
	}
	return 0
}

// cluster is a template: its positions, its version history and its place
// in the tenant's bucket and LRU list.
type cluster struct {
	id        uint64
	key       uint64 // bucket key
	line      string // owned copy of the line that created the template
	slots     []slot
	nparams   int
	texts     []string // texts[v-1] is the text of version v
	lastUsed  uint64   // model tick of the last assignment
	count     uint64   // lines assigned
	oversized bool
	evicted   bool
	aliasID   uint64     // non-zero: merged into that template (dead)
	alts      [][]string // per slot: other literal values seen (bounded)
	nsib      int        // templates spawned for word differences
	anchor    uint64     // hash of the first plain word; 0 if none
	elastic   bool       // matched by its text's literal pieces, any shape
	pieces    []string   // elastic: the text split on "<*>"
	shapes    []uint64   // elastic: shape keys of lines it accepted
	words     int        // literal words of the current text; -1: unknown
	ten       *tenant
	prev      *cluster // LRU list: more recently used
	next      *cluster // LRU list: less recently used
}

func (c *cluster) version() uint32 { return uint32(len(c.texts)) }
func (c *cluster) text() string    { return c.texts[len(c.texts)-1] }

// buildText renders the current slots into a template text.
func (c *cluster) buildText() string {
	if c.oversized {
		return Wildcard
	}
	var b strings.Builder
	b.Grow(len(c.line) + 2*c.nparams)
	for _, s := range c.slots {
		if s.param {
			b.WriteString(c.line[s.start : s.start+s.prefix])
			b.WriteString(Wildcard)
		} else {
			b.WriteString(c.line[s.start:s.end])
		}
	}
	return b.String()
}

// tenant is the per-tenant state.
type tenant struct {
	name      string
	buckets   map[uint64][]*cluster
	head      *cluster // most recently used
	tail      *cluster // least recently used
	n         int      // live templates
	evictions uint64
	oversized *cluster
	set       *settings             // effective knobs of the tenant
	anchors   map[uint64][]*cluster // live templates by anchor word
	byShape   map[uint64][]*cluster // elastic templates by accepted shape, id order
}

func (t *tenant) index(c *cluster) {
	if c.anchor != 0 {
		t.anchors[c.anchor] = append(t.anchors[c.anchor], c)
	}
}

func (t *tenant) unindex(c *cluster) {
	if c.anchor == 0 {
		return
	}
	b := t.anchors[c.anchor]
	if i := slices.Index(b, c); i >= 0 {
		b = slices.Delete(b, i, i+1)
	}
	if len(b) == 0 {
		delete(t.anchors, c.anchor)
	} else {
		t.anchors[c.anchor] = b
	}
}

func (t *tenant) pushFront(c *cluster) {
	c.prev = nil
	c.next = t.head
	if t.head != nil {
		t.head.prev = c
	}
	t.head = c
	if t.tail == nil {
		t.tail = c
	}
}

func (t *tenant) unlink(c *cluster) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		t.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		t.tail = c.prev
	}
	c.prev, c.next = nil, nil
}

func (t *tenant) touch(c *cluster) {
	if t.head == c {
		return
	}
	t.unlink(c)
	t.pushFront(c)
}

// Model is the template miner. It is NOT safe for concurrent use; drive it
// from one goroutine. See the package documentation for its guarantees.
type Model struct {
	cfg      Config
	nextID   uint64 // next template id; starts at 1
	tick     uint64 // lines mined so far; orders LRU
	tenants  map[string]*tenant
	clusters map[uint64]*cluster // live templates by id

	created, changes, evictions, oversized, merges, unmatched uint64
	dropped                                                   uint64 // templates of an older engine's snapshot, not restored

	defSet *settings            // settings of tenants without overrides
	sets   map[string]*settings // per-tenant overrides
	mtoks  []token              // scratch for masks

	lastTenant *tenant  // cache for runs of the same tenant
	toks       []token  // scratch for Mine
	slab       []string // parameter slices are cut from it
}

// New returns an empty model. Zero fields of cfg take their defaults.
func New(cfg Config) (*Model, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("mining config: %w", err)
	}
	def, per := compileSettings(cfg)
	return &Model{
		cfg:      cfg,
		nextID:   1,
		tenants:  make(map[string]*tenant),
		clusters: make(map[uint64]*cluster),
		defSet:   def,
		sets:     per,
	}, nil
}

// Config returns the effective configuration of m.
func (m *Model) Config() Config { return m.cfg }

// Prepared is a tokenized line, produced by Prepare.
type Prepared struct {
	line string
	toks []token
	raw  int  // tokens before dates and lists were merged
	over bool // more than HardMaxTokens tokens
	key  uint64
}

// Line returns the prepared line.
func (p *Prepared) Line() string { return p.line }

// Prepare tokenizes line for MinePrepared. It is a pure function: it may run
// on many goroutines at once and in any order; only the order of the
// MinePrepared calls determines ids.
func Prepare(line string) Prepared {
	p := Prepared{line: line}
	p.toks, p.raw, p.over, p.key = tokenizeKey(nil, line, HardMaxTokens)
	return p
}

// Preparer is Prepare with the lines' tokens cut from shared arrays, one
// allocation for many lines instead of a growing slice per line. The
// tokens stay referenced by the Prepared values only (the model copies what
// it keeps). Prepare and Begin are not safe for concurrent use; Done may be
// called from another goroutine.
//
// Arrays are used again once the caller says the Prepared values that
// use them are gone: lines are prepared in batches numbered in increasing
// order (Begin), and Done(n) says that no Prepared value of batch n or an
// earlier one is used any more. An array is then free for new lines once
// it is full and every batch that cut lines from it is done. A Preparer
// whose Done is never called allocates a new array each time, as before.
type Preparer struct {
	toks  []token // the free part of the current array
	whole []token // the current array, from its start
	batch uint64  // the batch being prepared (Begin)

	mu      sync.Mutex
	retired []retiredTokens // full arrays, oldest first
	free    [][]token       // arrays no Prepared value uses
}

// retiredTokens is a full array and the last batch that cut lines from it.
type retiredTokens struct {
	toks  []token
	batch uint64
}

// preparerChunk is the number of tokens allocated at once (about 1,000
// lines' worth); preparerFree bounds the free arrays kept.
const (
	preparerChunk = 32 << 10
	preparerFree  = 8
)

// Begin starts batch n (n greater than every batch before): the lines
// prepared from now on belong to it.
func (p *Preparer) Begin(n uint64) { p.batch = n }

// Done says that the Prepared values of batch n and every batch before
// it are no longer used: their arrays may hold new lines' tokens.
func (p *Preparer) Done(n uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := 0
	for ; i < len(p.retired) && p.retired[i].batch <= n; i++ {
		if len(p.free) < preparerFree && cap(p.retired[i].toks) == preparerChunk {
			p.free = append(p.free, p.retired[i].toks[:0])
		}
		p.retired[i] = retiredTokens{}
	}
	p.retired = append(p.retired[:0], p.retired[i:]...)
}

// grow replaces the current array by one with room for want tokens: a
// free one when it is large enough, else a new one.
func (p *Preparer) grow(want int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.whole != nil {
		p.retired = append(p.retired, retiredTokens{toks: p.whole, batch: p.batch})
	}
	if n := len(p.free); n > 0 && want <= preparerChunk {
		p.whole = p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
	} else {
		p.whole = make([]token, 0, max(preparerChunk, want))
	}
	p.toks = p.whole
}

// Prepare is Prepare(line) with its tokens taken from p's arrays.
func (p *Preparer) Prepare(line string) Prepared {
	if want := len(line)/2 + 16; cap(p.toks) < want {
		p.grow(want)
	}
	pr := Prepared{line: line}
	pr.toks, pr.raw, pr.over, pr.key = tokenizeKey(p.toks, line, HardMaxTokens)
	if len(pr.toks) > 0 && cap(pr.toks) == cap(p.toks) {
		// Still in the shared array: take what the line used and cap
		// it, so that nothing appends into the next line's tokens.
		p.toks = p.toks[len(pr.toks):len(pr.toks)]
		pr.toks = pr.toks[:len(pr.toks):len(pr.toks)]
	}
	return pr
}

// Mine assigns line (of tenant) to a template. Any created/changed events
// are appended to events, which may be nil.
func (m *Model) Mine(tenant, line string, events []Event) (Result, []Event) {
	if len(line) > m.cfg.MaxLineBytes {
		return m.mineOversized(tenant, line, events)
	}
	var over bool
	var key uint64
	m.toks, _, over, key = tokenizeKey(m.toks[:0], line, m.cfg.MaxTokens)
	if over {
		return m.mineOversized(tenant, line, events)
	}
	toks := m.toks
	if ms := m.tenant(tenant).set.masks; len(ms) > 0 {
		// When no mask matches, toks stand: m.toks's array, which must
		// not become m.mtoks (the next line's masked tokens would be
		// written over the tokens they are cut from).
		if mt, masked := applyMasks(ms, line, toks, m.mtoks); masked {
			m.mtoks, toks = mt, mt
		}
		key = shapeKey(line, toks)
	}
	return m.mine(tenant, line, toks, key, events)
}

// MinePrepared is Mine for a line tokenized by Prepare. For the same
// sequence of lines it gives exactly what Mine gives.
func (m *Model) MinePrepared(tenant string, p Prepared, events []Event) (Result, []Event) {
	if len(p.line) > m.cfg.MaxLineBytes || p.over || p.raw > m.cfg.MaxTokens {
		return m.mineOversized(tenant, p.line, events)
	}
	if len(m.tenant(tenant).set.masks) > 0 {
		return m.Mine(tenant, p.line, events) // Prepare knows no tenant's masks
	}
	return m.mine(tenant, p.line, p.toks, p.key, events)
}

func (m *Model) tenant(name string) *tenant {
	if t := m.lastTenant; t != nil && t.name == name {
		return t
	}
	t := m.tenants[name]
	if t == nil {
		name = strings.Clone(name)
		t = &tenant{name: name, buckets: make(map[uint64][]*cluster), anchors: make(map[uint64][]*cluster),
			byShape: make(map[uint64][]*cluster), set: m.sets[name]}
		if t.set == nil {
			t.set = m.defSet
		}
		m.tenants[name] = t
	}
	m.lastTenant = t
	return t
}

func (m *Model) mineOversized(tname, line string, events []Event) (Result, []Event) {
	t := m.tenant(tname)
	m.tick++
	m.oversized++
	return m.catchAll(t, line, events)
}

// catchAll assigns line whole to the tenant's "<*>" template.
func (m *Model) catchAll(t *tenant, line string, events []Event) (Result, []Event) {
	c := t.oversized
	if c == nil {
		c = &cluster{oversized: true, nparams: 1}
		c.texts = []string{Wildcard}
		events = m.add(t, c, events)
		t.oversized = c
	}
	c.lastUsed = m.tick
	c.count++
	t.touch(c)
	return Result{ID: c.id, Version: c.version(), Params: []string{line}}, events
}

// add registers a new cluster (texts already set) under a fresh id, evicting
// the tenant's least-recently-used template when the cap is reached.
func (m *Model) add(t *tenant, c *cluster, events []Event) []Event {
	for t.n >= m.cfg.MaxTemplatesPerTenant && t.tail != nil {
		m.evict(t, t.tail)
	}
	c.id = m.nextID
	m.nextID++
	c.ten = t
	c.lastUsed = m.tick
	m.clusters[c.id] = c
	t.n++
	t.pushFront(c)
	m.created++
	return append(events, Event{Kind: EventCreated, ID: c.id, Tenant: t.name, Version: 1, Template: c.text(), Kinds: c.kinds()})
}

func (m *Model) evict(t *tenant, c *cluster) {
	t.unlink(c)
	t.n--
	t.evictions++
	m.evictions++
	c.evicted = true
	delete(m.clusters, c.id)
	if c.oversized {
		t.oversized = nil
		return
	}
	if c.aliasID != 0 {
		return // already out of its bucket and index
	}
	t.unindex(c)
	if c.elastic {
		t.unindexShapes(c)
	} else {
		t.removeFromBucket(c)
	}
}

func (t *tenant) removeFromBucket(c *cluster) {
	b := t.buckets[c.key]
	if i := slices.Index(b, c); i >= 0 {
		b = slices.Delete(b, i, i+1)
	}
	if len(b) == 0 {
		delete(t.buckets, c.key)
	} else {
		t.buckets[c.key] = b
	}
}

// match compares a line with a template of the same bucket. ok is false
// when the structure differs. sim is the fraction of the template's literal
// word positions that the line repeats exactly (1 when it has none).
func match(c *cluster, line string, toks []token) (sim float64, ok bool) {
	if len(c.slots) != len(toks) {
		return 0, false
	}
	total, eq := 0, 0
	cl := c.line
	for i := range toks {
		tk := &toks[i]
		s := &c.slots[i]
		if tk.kind <= kPunct {
			if s.kind != tk.kind {
				return 0, false
			}
			if tk.end-tk.start == 1 && s.end-s.start == 1 {
				if line[tk.start] == cl[s.start] {
					continue
				}
				if tk.kind == kPunct {
					return 0, false
				}
			}
			lt := line[tk.start:tk.end]
			if tw := cl[s.start:s.end]; tw != lt && (tk.kind != kSpace || !absorbs(c.slots, i, lt, tw)) {
				return 0, false
			}
			continue
		}
		if s.kind <= kPunct {
			return 0, false
		}
		if s.param {
			if s.prefix > 0 && !strings.HasPrefix(line[tk.start:tk.end], cl[s.start:s.start+s.prefix]) {
				total++ // the id prefix differs: the slot must widen
			}
			continue
		}
		total++
		if s.end-s.start == tk.end-tk.start && cl[s.start:s.end] == line[tk.start:tk.end] {
			eq++
		}
	}
	if total == 0 {
		return 1, true
	}
	return float64(eq) / float64(total), true
}

func (m *Model) mine(tname, line string, toks []token, key uint64, events []Event) (Result, []Event) {
	t := m.tenant(tname)
	m.tick++
	bucket := t.buckets[key]
	var best *cluster
	bestSim := -1.0
	for _, c := range bucket {
		sim, ok := match(c, line, toks)
		if !ok {
			continue
		}
		if sim > bestSim || (sim == bestSim && c.nparams > best.nparams) {
			best, bestSim = c, sim
		}
	}
	var c *cluster
	var ps []string
	n0 := len(events)
	if t.set.matchOnly {
		return m.mineExisting(t, line, toks, key, events)
	}
	if best != nil && bestSim >= t.set.similarity {
		c = best
		if bestSim < 1 {
			c, events = m.join(t, best, line, toks, events)
			// Widening can move where extra whitespace is absorbed; a
			// line that no longer fits gets a template of its own.
			if _, ok := match(c, line, toks); !ok {
				c, events = m.newFixed(t, line, toks, key, anchorKey(line, toks), events)
			}
		}
	} else {
		anchor := anchorKey(line, toks)
		if c, ps, events = m.elastic(t, anchor, key, line, toks, events); c == nil {
			c, events = m.newFixed(t, line, toks, key, anchor, events)
		}
	}
	if len(events) > n0 {
		// c is new or its text changed: it may now read exactly like
		// another template of the tenant.
		if o, evs := m.dedupe(t, c, events); o != c {
			c, events = o, evs
			if c.elastic {
				ps, _ = matchPieces(c.pieces, line)
			}
		}
	}
	t.touch(c)
	c.lastUsed = m.tick
	c.count++
	if !c.elastic {
		ps = m.params(c, line, toks)
	}
	return Result{ID: c.id, Version: c.version(), Params: ps}, events
}

// newFixed creates a fixed-shape template from a line.
func (m *Model) newFixed(t *tenant, line string, toks []token, key, anchor uint64, events []Event) (*cluster, []Event) {
	c := newCluster(line, toks, key)
	c.anchor = anchor
	events = m.add(t, c, events)
	t.buckets[key] = append(t.buckets[key], c)
	t.index(c)
	return c, events
}

// slabSize is the number of parameter strings allocated at once.
const slabSize = 512

// alloc returns an empty slice with capacity n for a line's parameters. The
// slices are cut from a shared array with their capacity capped, so they
// never overlap and appending to one reallocates it.
func (m *Model) alloc(n int) []string {
	if n > slabSize/8 {
		return make([]string, 0, n)
	}
	if len(m.slab) < n {
		m.slab = make([]string, slabSize)
	}
	ps := m.slab[:0:n]
	m.slab = m.slab[n:]
	return ps
}

// absorbs reports whether the whitespace run lw of a line can stand where
// template slot i has the whitespace tw: the extra whitespace goes into the
// parameter after it (lw starts with tw) or else the one before it (lw ends
// with tw). This lets "user  0101" (an empty user name) fit "user <*>".
func absorbs(slots []slot, i int, lw, tw string) bool {
	if len(lw) <= len(tw) {
		return false
	}
	if i+1 < len(slots) && slots[i+1].param {
		return slots[i+1].prefix == 0 && lw[:len(tw)] == tw
	}
	if i > 0 && slots[i-1].param {
		return lw[len(lw)-len(tw):] == tw
	}
	return false
}

// params returns the parameters of a line that matched c, including any
// whitespace they absorb (see absorbs).
func (m *Model) params(c *cluster, line string, toks []token) []string {
	if c.nparams == 0 {
		return nil
	}
	ps := m.alloc(c.nparams)
	slots := c.slots
	for i := range slots {
		if !slots[i].param {
			continue
		}
		start, end := toks[i].start+slots[i].prefix, toks[i].end
		if i > 0 && slots[i-1].kind == kSpace && slots[i].prefix == 0 {
			if tw := slots[i-1].end - slots[i-1].start; toks[i-1].end-toks[i-1].start != tw {
				start = toks[i-1].start + tw
			}
		}
		if i+1 < len(slots) && slots[i+1].kind == kSpace && !(i+2 < len(slots) && slots[i+2].param) {
			if tw := slots[i+1].end - slots[i+1].start; toks[i+1].end-toks[i+1].start != tw {
				end = toks[i+1].end - tw
			}
		}
		ps = append(ps, line[start:end])
	}
	return ps
}

// maxSiblings bounds the templates one template may spawn for word
// differences before it simply widens.
const maxSiblings = 32

// join assigns a similar line to best. Positions where the line differs
// become parameters when the line's token is variable-looking or when the
// position has now shown VariableAfter distinct words. Otherwise the
// difference may be an enumeration ("startup"/"shutdown"): the line gets a
// template of its own, a sibling of best, and best remembers the value.
// When a template later widens, the templates it covers are merged into it.
func (m *Model) join(t *tenant, best *cluster, line string, toks []token, events []Event) (*cluster, []Event) {
	need := false // a word position is not (yet) variable
	diff := false
	for i := range best.slots {
		s := &best.slots[i]
		if s.param && s.prefix > 0 && !strings.HasPrefix(line[toks[i].start:toks[i].end], best.pre(s)) {
			diff = true // the id prefix goes
			continue
		}
		if s.param || s.kind <= kPunct {
			continue
		}
		tk := toks[i]
		v := line[tk.start:tk.end]
		if best.line[s.start:s.end] == v {
			continue
		}
		diff = true
		if tk.kind == kVar || need {
			continue
		}
		if isConstantCase(v) && isConstantCase(best.line[s.start:s.end]) {
			need = true // enumeration constants name different events
			continue
		}
		if isInflected(v) && isInflected(best.line[s.start:s.end]) {
			need = true // state words ("started", "stopping") name different events
			continue
		}
		n := 2
		if best.alts != nil {
			n = 1 + len(best.alts[i])
			if !slices.Contains(best.alts[i], v) {
				n++
			}
		}
		if n < t.set.variableAfter {
			need = true
		}
	}
	if !diff {
		return best, events
	}
	if need && best.nsib < maxSiblings {
		if best.alts == nil {
			best.alts = make([][]string, len(best.slots))
		}
		for i := range best.slots {
			s := &best.slots[i]
			if s.param || s.kind <= kPunct {
				continue
			}
			tk := toks[i]
			v := line[tk.start:tk.end]
			if tk.kind != kVar && best.line[s.start:s.end] != v && !slices.Contains(best.alts[i], v) &&
				len(best.alts[i]) < t.set.variableAfter {
				best.alts[i] = append(best.alts[i], strings.Clone(v))
			}
		}
		best.nsib++
		return m.newFixed(t, line, toks, best.key, anchorKey(line, toks), events)
	}
	events = m.widen(best, line, toks, events)
	return m.absorb(t, best, events)
}

// absorb merges, after c widened, the templates of its bucket that c now
// covers into c; if an older template covers c, c is merged into it
// instead. It returns the surviving template.
func (m *Model) absorb(t *tenant, c *cluster, events []Event) (*cluster, []Event) {
	b := t.buckets[c.key]
	for _, o := range b {
		if o != c && o.id < c.id && !o.elastic && covers(o, c) {
			events = m.merge(t, c, o, events)
			c = o
			break
		}
	}
	b = t.buckets[c.key]
	for i := 0; i < len(b); i++ {
		o := b[i]
		if o != c && !o.elastic && covers(c, o) {
			events = m.merge(t, o, c, events)
			b = t.buckets[c.key]
			i--
		}
	}
	return c, events
}

// dedupe merges c with another live template of its tenant that has the
// very same text: two templates that read alike are one template, whatever
// the shapes of the lines that made them. The younger is merged into the
// older. When their lines have different shapes, the survivor becomes
// elastic and accepts both (it needs an anchor word to be found by lines
// of either shape; without one the templates stay apart). It returns the
// surviving template.
func (m *Model) dedupe(t *tenant, c *cluster, events []Event) (*cluster, []Event) {
	if c.oversized || c.aliasID != 0 || c.evicted {
		return c, events
	}
	text := c.text()
	var o *cluster
	consider := func(x *cluster) {
		if x != c && x.aliasID == 0 && !x.evicted && !x.oversized && (o == nil || x.id < o.id) && x.text() == text {
			o = x
		}
	}
	if !c.elastic {
		for _, x := range t.buckets[c.key] {
			consider(x)
		}
	}
	if c.anchor != 0 {
		cands := t.anchors[c.anchor]
		for k := len(cands) - 1; k >= 0 && k >= len(cands)-maxCandidates; k-- {
			consider(cands[k])
		}
	}
	if o == nil {
		return c, events
	}
	into, from := o, c
	if from.id < into.id {
		into, from = from, into
	}
	if into.elastic || from.elastic || into.key != from.key {
		if into.anchor == 0 || into.anchor != from.anchor {
			return c, events
		}
		if !into.elastic {
			t.removeFromBucket(into)
			into.elastic = true
			t.addShape(into, into.key)
			into.slots, into.alts, into.line = nil, nil, ""
			into.pieces = strings.Split(into.text(), Wildcard)
			into.nparams = len(into.pieces) - 1
		}
		if from.elastic {
			for _, k := range from.shapes {
				t.addShape(into, k)
			}
		} else {
			t.addShape(into, from.key)
		}
	}
	events = m.merge(t, from, into, events)
	return into, events
}

// merge retires template from into template into.
func (m *Model) merge(t *tenant, from, into *cluster, events []Event) []Event {
	from.aliasID = into.id
	from.alts = nil
	t.unindex(from)
	if from.elastic {
		t.unindexShapes(from)
	} else {
		t.removeFromBucket(from)
	}
	m.merges++
	return append(events, Event{Kind: EventMerged, ID: from.id, Tenant: t.name, Version: from.version(),
		Template: into.text(), Previous: from.text(), Into: into.id})
}

// covers reports whether every line of sib also fits template c: same
// structure, and wherever sib has a literal, c has the same literal or a
// parameter; sib has no parameter where c has a literal.
func covers(c, sib *cluster) bool {
	if len(c.slots) != len(sib.slots) {
		return false
	}
	for i := range c.slots {
		a, b := &c.slots[i], &sib.slots[i]
		if (a.kind <= kPunct) != (b.kind <= kPunct) {
			return false
		}
		if a.param {
			if a.prefix > 0 {
				p := c.pre(a)
				if b.param && sib.pre(b) != p || !b.param && !strings.HasPrefix(sib.line[b.start:b.end], p) {
					return false
				}
			}
			continue
		}
		if b.param || c.line[a.start:a.end] != sib.line[b.start:b.end] {
			return false
		}
	}
	return true
}

// newCluster builds a template from a line: variable-looking chunks are
// parameters, everything else literal.
func newCluster(line string, toks []token, key uint64) *cluster {
	c := &cluster{key: key, line: strings.Clone(line), slots: make([]slot, len(toks)), words: -1}
	for i, tk := range toks {
		p := tk.kind == kVar
		c.slots[i] = slot{start: tk.start, end: tk.end, kind: tk.kind, param: p, mask: tk.mask}
		if p && tk.mask == 0 {
			c.slots[i].prefix = idPrefixLen(line[tk.start:tk.end])
		}
		if p {
			c.nparams++
		}
	}
	c.texts = []string{c.buildText()}
	return c
}

// widen turns every literal position where line differs into a parameter.
func (m *Model) widen(c *cluster, line string, toks []token, events []Event) []Event {
	changed := false
	for i := range c.slots {
		s := &c.slots[i]
		if s.param && s.prefix > 0 && !strings.HasPrefix(line[toks[i].start:toks[i].end], c.pre(s)) {
			s.prefix = 0
			changed = true
			continue
		}
		if s.param || s.kind <= kPunct {
			continue
		}
		tk := toks[i]
		if c.line[s.start:s.end] != line[tk.start:tk.end] {
			s.param = true
			c.nparams++
			changed = true
			if c.alts != nil {
				c.alts[i] = nil
			}
		}
	}
	if !changed {
		return events
	}
	prev := c.text()
	c.texts = append(c.texts, c.buildText())
	c.words = -1
	m.changes++
	return append(events, Event{Kind: EventChanged, ID: c.id, Tenant: c.ten.name, Version: c.version(), Template: c.text(), Previous: prev, Kinds: c.kinds()})
}

// isPlainWord reports whether w consists of letters, digits and '_' only:
// such a first word names the event (Drain's insight), while a first word
// like a host name ("proxy.example.com") is a value.
func isPlainWord(w string) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(c|0x20 >= 'a' && c|0x20 <= 'z' || isDigit(c) || c == '_') {
			return false
		}
	}
	return true
}

// shapeKey hashes the structure of a line (token classes, the bytes of
// punctuation tokens) and its first word, when that word is
// a plain word (see isPlainWord). Lines can only join templates of the same
// key.
func shapeKey(line string, toks []token) uint64 {
	return shapeFinish(line, toks, shapeHash(line, toks))
}

// The FNV-1a parameters of shapeKey.
const (
	shapeBasis = 14695981039346656037
	shapePrime = 1099511628211
)

// shapeValue is what shapeKey hashes for a token: its class, and for
// punctuation its first byte and length (match compares the bytes).
func shapeValue(line string, tk *token) uint64 {
	switch tk.kind {
	case kSpace:
		return shapeSpace
	case kPunct:
		return shapePunct(line[tk.start], int(tk.end-tk.start))
	}
	return shapeOther
}

// The shapeValue of a space and of any other token but punctuation.
const (
	shapeSpace = 1
	shapeOther = 7
)

// shapePunct is the shapeValue of punctuation of n bytes starting with c.
func shapePunct(c byte, n int) uint64 { return 2 | uint64(c)<<8 | uint64(n)<<16 }

// shapeMix mixes the shapeValue v of the next token into hash h.
func shapeMix(h, v uint64) uint64 { return (h ^ v) * shapePrime }

// shapeHash hashes the shapeValue of every token.
func shapeHash(line string, toks []token) uint64 {
	h := uint64(shapeBasis)
	for i := range toks {
		h = shapeMix(h, shapeValue(line, &toks[i]))
	}
	return h
}

// shapeFinish completes shapeKey from shapeHash h: the token count, and
// the first word when it is a plain word.
func shapeFinish(line string, toks []token, h uint64) uint64 {
	const prime = shapePrime
	// The first word: the first chunk, or after a header the first chunk
	// that is not the header.
	first := -1
	skipHead := len(toks) > 0 && toks[0].head
	for i := range toks {
		if toks[i].kind >= kWord && !(skipHead && toks[i].head) {
			first = i
			break
		}
	}
	h ^= uint64(len(toks))
	h *= prime
	if first >= 0 && toks[first].kind == kWord && isPlainWord(line[toks[first].start:toks[first].end]) {
		tk := toks[first]
		for p := tk.start; p < tk.end; p++ {
			h ^= uint64(line[p])
			h *= prime
		}
		h ^= 0xff
		h *= prime
	}
	return h
}

// Canonical returns the template that id was merged into (following merges
// transitively), or id itself when it was not merged or is unknown.
func (m *Model) Canonical(id uint64) uint64 {
	for {
		c := m.clusters[id]
		if c == nil || c.aliasID == 0 {
			return id
		}
		id = c.aliasID
	}
}

// kinds returns the mask name of each parameter of c's current text, or
// nil when none came from a mask.
func (c *cluster) kinds() []string {
	if c.elastic || c.oversized || c.ten == nil {
		return nil
	}
	var out []string
	for i, s := range c.slots {
		if !s.param {
			continue
		}
		if s.mask != 0 && out == nil {
			out = make([]string, 0, c.nparams)
			for _, p := range c.slots[:i] {
				if p.param {
					out = append(out, "")
				}
			}
		}
		if out != nil {
			name := ""
			if ms := c.ten.set.masks; int(s.mask) <= len(ms) && s.mask > 0 {
				name = ms[s.mask-1].name
			}
			out = append(out, name)
		}
	}
	return out
}

// Kinds returns the kind of each <*> of the current text of a live
// template: the name of the mask that made the parameter, or "". It is nil
// when no parameter came from a mask.
func (m *Model) Kinds(id uint64) []string {
	if c := m.clusters[id]; c != nil {
		return c.kinds()
	}
	return nil
}

// mineExisting is mine in match-only mode: the line joins a template it
// fits as it is, or the catch-all.
func (m *Model) mineExisting(t *tenant, line string, toks []token, key uint64, events []Event) (Result, []Event) {
	var best *cluster
	for _, c := range t.buckets[key] {
		if sim, ok := match(c, line, toks); ok && sim == 1 && (best == nil || c.nparams > best.nparams) {
			best = c
		}
	}
	if best != nil {
		t.touch(best)
		best.lastUsed = m.tick
		best.count++
		return Result{ID: best.id, Version: best.version(), Params: m.params(best, line, toks)}, events
	}
	anchor := anchorKey(line, toks)
	try := func(cs []*cluster) (Result, bool) {
		for _, c := range cs {
			if !c.elastic || c.anchor != anchor || c.aliasID != 0 {
				continue
			}
			if ps, ok := matchPieces(c.pieces, line); ok {
				t.touch(c)
				c.lastUsed = m.tick
				c.count++
				return Result{ID: c.id, Version: c.version(), Params: ps}, true
			}
		}
		return Result{}, false
	}
	if anchor != 0 {
		if r, ok := try(t.byShape[key]); ok {
			return r, events
		}
		if r, ok := try(t.anchors[anchor]); ok {
			return r, events
		}
	}
	m.unmatched++
	return m.catchAll(t, line, events)
}

// Template returns the tenant, current version and text of a live template.
func (m *Model) Template(id uint64) (tenant string, version uint32, text string, ok bool) {
	c := m.clusters[id]
	if c == nil {
		return "", 0, "", false
	}
	return c.ten.name, c.version(), c.text(), true
}

// TemplateVersion returns the text of version v of a live template. Every
// version of a live template stays retrievable, so a line mined against
// version v renders with version v's text even after the template widened.
func (m *Model) TemplateVersion(id uint64, v uint32) (string, bool) {
	c := m.clusters[id]
	if c == nil || v == 0 || int(v) > len(c.texts) {
		return "", false
	}
	return c.texts[v-1], true
}

// Stats returns counters and per-tenant template counts.
func (m *Model) Stats() Stats {
	s := Stats{
		Lines:     m.tick,
		Templates: len(m.clusters),
		Created:   m.created,
		Changes:   m.changes,
		Evictions: m.evictions,
		Oversized: m.oversized,
		Merges:    m.merges,
		Unmatched: m.unmatched,
		Dropped:   m.dropped,
	}
	names := make([]string, 0, len(m.tenants))
	for n := range m.tenants {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		t := m.tenants[n]
		s.Tenants = append(s.Tenants, TenantStats{Tenant: n, Templates: t.n, Evictions: t.evictions})
	}
	return s
}

// isConstantCase reports whether w is written like an enumeration constant:
// capitals, digits and '_' only, at least two capitals ("RUNNING",
// "FAIL_CLEANUP").
// isInflected reports whether w is a lowercase word with an English
// participle ending ("started", "stopping"): in a log message such a word
// names what happened, so two of them in one position are two events, not
// values of one variable.
func isInflected(w string) bool {
	if len(w) < 5 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return strings.HasSuffix(w, "ed") || strings.HasSuffix(w, "ing")
}

func isConstantCase(w string) bool {
	caps := 0
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case c >= 'A' && c <= 'Z':
			caps++
		case c == '_' || isDigit(c):
		default:
			return false
		}
	}
	return caps >= 2
}
