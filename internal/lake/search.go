package lake

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"

	"github.com/quarrylake/quarry/internal/byteset"
	"github.com/quarrylake/quarry/internal/delta"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/query"
	"github.com/quarrylake/quarry/internal/recfile"
)

// SearchOptions narrow a search beyond its query. Zero fields narrow
// nothing.
type SearchOptions struct {
	// Tenant limits the search to one tenant (as tenant:NAME does).
	Tenant string
	// TemplateID limits the search to a template and the templates merged
	// into it (as template:N does).
	TemplateID uint64
	// Since is inclusive, Until exclusive (record time); they intersect
	// the query's own time range.
	Since, Until time.Time
	// Limit stops a line search after this many records (0: the query's
	// | limit, else unlimited). The smaller of both wins.
	Limit int
	// After resumes a line search after this record: only records whose
	// (wal_seq, record_index) is greater are returned (paging).
	After *Position
	// LineOnly leaves Record.Params nil (the line, time, template and
	// source are set): what raw output needs, without splitting every line
	// into its parameters.
	LineOnly bool
	// Workers decode files in parallel (0: GOMAXPROCS).
	Workers int
}

// Position is a record's place in WAL order.
type Position struct {
	WALSeq uint64 `json:"wal_seq"`
	Index  uint32 `json:"index"`
}

func (p *Position) before(seq int64, idx int32) bool {
	return p == nil || uint64(seq) > p.WALSeq || uint64(seq) == p.WALSeq && uint32(idx) > p.Index
}

// ErrAggregate is returned by Search for a query with a count or top pipe
// (use Aggregate) and by Aggregate for one without.
var ErrAggregate = errors.New("query aggregation mismatch")

// Search calls fn for every committed record q selects, in (wal_seq,
// record_index) order, like Query. Before reading rows it prunes
// partitions and files by q.Bounds() and opts (tenant, date, the ts and
// template_id stats), plans q over each tenant's templates
// (query.PlanTemplates) and skips files that hold no template the plan may
// match. Rows of templates the plan settles false are skipped, rows of
// templates it settles true are taken without evaluation, and only the
// others are evaluated (TemplatePlan.Match). Files are decoded in parallel
// (opts.Workers) a bounded window ahead of the ordered merge. A record of a
// template version the templates table lacks is ErrTemplateMissing, as in
// Query (a file its stats prune is not read). An error from fn stops the
// search and is returned.
func (l *Lake) Search(ctx context.Context, q *query.Query, opts SearchOptions, fn func(Record) error) error {
	if q.Aggregates() {
		return fmt.Errorf("search %q: %w: the query counts; use Aggregate", q.Source(), ErrAggregate)
	}
	s, err := l.prepare(ctx, q, opts)
	if err != nil || s == nil {
		return err
	}
	return s.merge(ctx, s.readRecords, func(c *hitCursor, _ bound, _ int) (int, error) {
		err := fn(c.recs[0])
		c.recs[0] = Record{}
		c.recs = c.recs[1:]
		return 1, err
	})
}

// SearchRaw writes the line of every committed record q selects, and a
// newline, to w in the order Search calls fn (raw output: Search with
// LineOnly and WriteRaw, byte for byte). A records v3 file's rows are
// decoded to their columns (recfile.Lines) and the lines of the rows the
// query selects are rendered from them straight into output buffers, with
// no Record per line, by renderers in parallel and written in WAL order
// (rawOut); a Scan template's rows are matched as Search matches them. w
// sees writes of about rawRows lines.
func (l *Lake) SearchRaw(ctx context.Context, q *query.Query, opts SearchOptions, w io.Writer) error {
	if q.Aggregates() {
		return fmt.Errorf("search %q: %w: the query counts; use Aggregate", q.Source(), ErrAggregate)
	}
	opts.LineOnly = true
	s, err := l.prepare(ctx, q, opts)
	if err != nil || s == nil {
		return err
	}
	out := newRawOut(w, s.workers)
	defer out.stop()
	read := s.readLines
	if s.limit() == 0 {
		read = func(ctx context.Context, f searchFile) (*hitCursor, error) {
			c, err := s.readLines(ctx, f)
			if err == nil && c != nil && c.lines != nil && len(c.sel) > 0 {
				out.renderAhead(c)
			}
			return c, err
		}
	}
	if err := s.merge(ctx, read, out.emit); err != nil {
		return err
	}
	return out.flush()
}

// rawRows is how many rows a render job of SearchRaw holds: about 200 KB
// of lines, a buffer that stays in the cache.
const rawRows = 2048

// rawOut renders the rows the merge hands it in parallel and writes their
// lines in the merge's order. The merge only puts rows in order: emit cuts
// them into jobs of rawRows rows (runs of one cursor's rows), renderers
// (one a worker, each with a recfile.LineRenderer of its own) render each
// job into a buffer of its own, and the jobs' buffers are written to w in
// the order they were cut, at most depth jobs in flight. A file's Lines
// are released once the job that holds its last row is written (the next
// file decodes into its pages), so nothing renders from them after.
type rawOut struct {
	w     io.Writer
	jobs  chan *rawJob // to the renderers
	queue []*rawJob    // cut, in output order, not yet written
	cur   *rawJob      // being filled
	free  []*rawJob
	depth int
	wg    sync.WaitGroup
	once  sync.Once
	sem   chan struct{}  // renderAhead's renders running
	bg    sync.WaitGroup // renderAhead's renders
}

// rawJob is a run of rows to render: segs, rows of them, rendered into buf.
type rawJob struct {
	segs    []rawSeg
	rows    int
	release []*recfile.Lines // drained by this job: released once it is written
	buf     []byte
	err     error
	done    chan struct{} // one send per render
}

// rawSeg is a run of one cursor's rows: sel of lines, or recs (a records
// v2 file's).
type rawSeg struct {
	lines *recfile.Lines
	sel   []int32
	recs  []Record
}

func newRawOut(w io.Writer, renderers int) *rawOut {
	renderers = max(renderers, 1)
	o := &rawOut{w: w, depth: 2 * renderers, sem: make(chan struct{}, renderers)}
	o.jobs = make(chan *rawJob, o.depth)
	for range renderers {
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			var r recfile.LineRenderer
			for j := range o.jobs {
				j.render(&r)
				j.done <- struct{}{}
			}
		}()
	}
	return o
}

// render renders j's rows into j.buf, each line and a newline.
func (j *rawJob) render(r *recfile.LineRenderer) {
	buf := j.buf[:0]
	for _, sg := range j.segs {
		for _, x := range sg.sel {
			var err error
			if buf, err = r.AppendLine(buf, sg.lines, int(x)); err != nil {
				j.buf, j.err = buf, err
				return
			}
			buf = append(buf, '\n')
		}
		for i := range sg.recs {
			buf = append(buf, sg.recs[i].Line...)
			buf = append(buf, '\n')
		}
	}
	j.buf = buf
}

// emit takes c's rows below b, at most left of them (left < 0: no limit),
// and at least one, into jobs; a full job goes to the renderers.
func (o *rawOut) emit(c *hitCursor, b bound, left int) (int, error) {
	n := 0
	for !c.empty() && n != left {
		if n > 0 && !b.after(c.head()) {
			break
		}
		if o.cur == nil {
			o.cur = o.newJob()
		}
		j := o.cur
		most := c.len()
		if left >= 0 {
			most = min(most, left-n)
		}
		if len(c.ahead) > 0 {
			most = min(most, c.ahead[0].b-c.ahead[0].a-c.at)
		} else {
			most = min(most, rawRows-j.rows)
		}
		k := 1
		for k < most && b.after(c.pos(k)) {
			k++
		}
		if len(c.ahead) > 0 {
			if err := o.writeAhead(c, k); err != nil {
				return n, err
			}
			n += k
			continue
		}
		if c.lines != nil {
			j.segs = append(j.segs, rawSeg{lines: c.lines, sel: c.sel[:k:k]})
			c.sel = c.sel[k:]
			if c.empty() {
				j.release = append(j.release, c.lines)
			}
		} else {
			j.segs = append(j.segs, rawSeg{recs: c.recs[:k:k]})
			c.recs = c.recs[k:]
		}
		j.rows += k
		n += k
		if j.rows >= rawRows {
			if err := o.send(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// aheadRows is how many rows a run rendered ahead holds: a template's rows
// in it lie next to each other in its file (AppendLines).
const aheadRows = 8192

// aheadRun is rows [a, b) of a cursor's sel, rendered ahead: text holds
// their lines, ends[k] the end of row a+k's.
type aheadRun struct {
	a, b int
	text []byte
	ends []int
	err  error
	done chan struct{} // closed once rendered
}

// aheadRuns is how many of a cursor's runs are rendered ahead of the merge
// (rendered, or being rendered, and not written): enough to keep the
// renderers busy while the merge writes, few enough that a written run's
// text is what the next run renders into (aheadBufs), not fresh memory
// the kernel zeroes: every run rendered at once held most of the output.
const aheadRuns = 2

// renderAhead renders c's rows, all of them, in runs of aheadRows rows,
// by the renderers (o.sem's at a time), aheadRuns of them ahead of the
// merge (writeAhead starts the next as it writes one), and releases c's
// Lines once the last is rendered.
func (o *rawOut) renderAhead(c *hitCursor) {
	sel := c.lines.Select(c.sel, aheadRows)
	runs := make([]*aheadRun, sel.Runs())
	for x := range runs {
		a, b := sel.Run(x)
		runs[x] = &aheadRun{a: a, b: b, done: make(chan struct{})}
	}
	c.ahead = runs
	var left atomic.Int32
	left.Store(int32(len(runs)))
	started := 0
	c.renderNext = func() {
		if started == len(runs) {
			return
		}
		run, x := runs[started], started
		started++
		o.bg.Add(1)
		go func() {
			defer o.bg.Done()
			o.sem <- struct{}{}
			r := renderers.Get().(*recfile.LineRenderer)
			t := aheadBufs.Get().(*aheadBuf)
			run.text, run.ends, run.err = r.AppendLines(t.text[:0], t.ends, sel, x)
			renderers.Put(r)
			<-o.sem
			if left.Add(-1) == 0 {
				c.lines.Release() // its rows' places stay: the merge reads them
			}
			close(run.done)
		}()
	}
	for range aheadRuns {
		c.renderNext()
	}
}

var renderers = sync.Pool{New: func() any { return new(recfile.LineRenderer) }}

// aheadBuf is a run's text and ends, kept for the next run.
type aheadBuf struct {
	text []byte
	ends []int
}

var aheadBufs = sync.Pool{New: func() any { return new(aheadBuf) }}

// writeAhead writes c's next k lines, rendered ahead (at most the rest of
// c.ahead[0]), after every job cut before them.
func (o *rawOut) writeAhead(c *hitCursor, k int) error {
	if err := o.flush(); err != nil { // the jobs cut before c's lines
		return err
	}
	run := c.ahead[0]
	<-run.done
	if run.err != nil {
		return run.err
	}
	start := 0
	if c.at > 0 {
		start = run.ends[c.at-1]
	}
	if _, err := o.w.Write(run.text[start:run.ends[c.at+k-1]]); err != nil {
		return err
	}
	c.at += k
	c.sel = c.sel[k:]
	if c.at == len(run.ends) {
		aheadBufs.Put(&aheadBuf{run.text, run.ends})
		run.text, run.ends = nil, nil
		c.ahead, c.at = c.ahead[1:], 0
		c.renderNext()
	}
	return nil
}

func (o *rawOut) newJob() *rawJob {
	if k := len(o.free); k > 0 {
		j := o.free[k-1]
		o.free = o.free[:k-1]
		return j
	}
	return &rawJob{buf: make([]byte, 0, rawRows*128), done: make(chan struct{}, 1)}
}

// send hands the job being filled to the renderers and, with depth jobs
// in flight, writes the oldest.
func (o *rawOut) send() error {
	j := o.cur
	o.cur = nil
	o.queue = append(o.queue, j)
	o.jobs <- j // never blocks: at most depth jobs are queued
	if len(o.queue) >= o.depth {
		return o.writeOldest()
	}
	return nil
}

// writeOldest waits for the oldest job in flight, writes its lines and
// releases the Lines it drained.
func (o *rawOut) writeOldest() error {
	j := o.queue[0]
	<-j.done
	o.queue = o.queue[1:]
	if j.err != nil {
		return j.err
	}
	if _, err := o.w.Write(j.buf); err != nil {
		return err
	}
	for _, l := range j.release {
		l.Release() // its rows are written: the next file reuses its pages
	}
	clear(j.segs)
	clear(j.release)
	j.segs, j.release, j.rows = j.segs[:0], j.release[:0], 0
	o.free = append(o.free, j)
	return nil
}

// flush renders and writes what is left.
func (o *rawOut) flush() error {
	if o.cur != nil && o.cur.rows > 0 {
		if err := o.send(); err != nil {
			return err
		}
	}
	for len(o.queue) > 0 {
		if err := o.writeOldest(); err != nil {
			return err
		}
	}
	return nil
}

// stop ends the renderers once the jobs handed to them are rendered.
func (o *rawOut) stop() {
	o.once.Do(func() {
		close(o.jobs)
		o.wg.Wait()
		o.bg.Wait()
	})
}

// limit is the smaller of the query's | limit and opts.Limit; 0: none.
func (s *search) limit() int {
	limit := s.q.Limit()
	if s.opts.Limit > 0 && (limit == 0 || s.opts.Limit < limit) {
		limit = s.opts.Limit
	}
	return limit
}

// Aggregate runs a query with a count or top pipe and returns its rows
// (query.Aggregator.Rows order; a bare | count always returns one row, 0
// when nothing matches), pruning and planning as Search does. When
// the plan and the keys need no column but template_id and ts (a count by
// template or by a time bucket of a query its templates settle, or of a
// time range), only those columns are read: no parameter, no line.
func (l *Lake) Aggregate(ctx context.Context, q *query.Query, opts SearchOptions) ([]query.Row, error) {
	agg := q.NewAggregator()
	if agg == nil {
		return nil, fmt.Errorf("aggregate %q: %w: the query returns lines; use Search", q.Source(), ErrAggregate)
	}
	opts.LineOnly = false // keys may need the parameters
	s, err := l.prepare(ctx, q, opts)
	if err != nil {
		return nil, err
	}
	if s != nil {
		aggs, err := s.aggregate(ctx)
		if err != nil {
			return nil, err
		}
		for _, a := range aggs {
			agg.Merge(a)
		}
	}
	rows := agg.Rows()
	if len(rows) == 0 && len(agg.Header()) == 1 {
		rows = []query.Row{{Count: 0}} // a bare count of nothing is 0, not no answer
	}
	return rows, nil
}

// searchFile is a records file the search reads.
type searchFile struct {
	add    delta.Add
	tenant string
	lo     int64
	plan   *tenantPlan
	// needle, when set, rules rows out in decodeV3 (recfile.Projection's
	// Needle: needles).
	needle func(recfile.Key) *recfile.Needle
}

// tenantPlan is the query planned over one tenant's templates.
type tenantPlan struct {
	plan *query.Plan
	scan bool    // some template is Scan: a file's summary may settle it
	ids  []int64 // Plan.IDs (within opts.TemplateID's family), sorted: for pruning by stats
	// narrow: every column the plan reads is template_id or ts, so the
	// file's other columns are not read.
	narrow bool
	// residual: the columns the Scan templates' residuals read (Plan.Columns
	// adds what the output needs, which SearchOptions.LineOnly narrows).
	residual query.Column
}

// search is one prepared search: the files to read and their plans.
type search struct {
	l       *Lake
	q       *query.Query
	opts    SearchOptions
	since   time.Time
	until   time.Time
	files   []searchFile
	family  map[int64]bool // opts.TemplateID's family
	tpls    templateSet
	texts   recfile.Templates
	workers int
}

// prepare takes the snapshots, loads templates, plans per tenant and prunes
// files; nil when nothing can match.
func (l *Lake) prepare(ctx context.Context, q *query.Query, opts SearchOptions) (*search, error) {
	b := q.Bounds()
	tenant := opts.Tenant
	if b.Tenant != "" {
		if tenant != "" && tenant != b.Tenant {
			return nil, nil
		}
		tenant = b.Tenant
	}
	s := &search{l: l, q: q, opts: opts, since: later(b.Since, opts.Since), until: earlier(b.Until, opts.Until)}
	if !s.since.IsZero() && !s.until.IsZero() && !s.since.Before(s.until) {
		return nil, nil
	}
	// Records first, templates second (see Query).
	snap, err := l.records.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("records snapshot: %w", err)
	}
	if s.tpls, err = l.loadTemplates(ctx, tenant); err != nil {
		return nil, err
	}
	s.texts = s.tpls.texts()
	if opts.TemplateID != 0 {
		s.family = s.tpls.family(int64(opts.TemplateID))
	}
	plans := map[string]*tenantPlan{}
	agg := q.NewAggregator()
	for _, a := range snap.Files {
		tn := a.PartitionValues["tenant"]
		if tenant != "" && tn != tenant {
			continue
		}
		st, _ := delta.ParseStats(a.Stats)
		if !FileInTimeRange(a.PartitionValues, st, s.since, s.until) {
			continue
		}
		if opts.After != nil {
			if _, hi, ok := fileSeqRange(a); ok && uint64(hi) < opts.After.WALSeq {
				continue
			}
		}
		tp, ok := plans[tn]
		if !ok {
			tp = s.plan(tn, agg)
			plans[tn] = tp
		}
		if lo, hi, ok := statIntRange(st, "template_id"); ok && !anyIn(tp.ids, lo, hi) {
			continue
		}
		lo, _, ok := fileSeqRange(a)
		if !ok {
			lo = -1 << 63
		}
		s.files = append(s.files, searchFile{add: a, tenant: tn, lo: lo, plan: tp})
	}
	sort.SliceStable(s.files, func(i, j int) bool { return s.files[i].lo < s.files[j].lo })
	s.workers = opts.Workers
	if s.workers <= 0 {
		s.workers = runtime.GOMAXPROCS(0)
	}
	return s, nil
}

// plan plans the query over a tenant's templates, merges included.
func (s *search) plan(tenant string, agg *query.Aggregator) *tenantPlan {
	var tpls []query.Template
	for k, r := range s.tpls.rows {
		if r.Tenant != tenant {
			continue
		}
		t := query.Template{ID: uint64(k.id), Version: uint32(k.version), Text: r.Template}
		if c := s.tpls.canonical(k.id); c != k.id {
			t.Canonical = uint64(c)
		}
		tpls = append(tpls, t)
	}
	slices.SortFunc(tpls, func(a, b query.Template) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Version, b.Version))
	})
	return s.planOver(tenant, tpls, agg)
}

// planOver plans the query over tpls (one tenant's template versions).
func (s *search) planOver(tenant string, tpls []query.Template, agg *query.Aggregator) *tenantPlan {
	return s.tenantPlanOf(s.q.PlanTemplates(tenant, tpls), agg)
}

// tenantPlanOf is the tenantPlan of p.
func (s *search) tenantPlanOf(p *query.Plan, agg *query.Aggregator) *tenantPlan {
	tp := &tenantPlan{plan: p}
	for _, id := range p.IDs() {
		if s.family == nil || s.family[int64(id)] {
			tp.ids = append(tp.ids, int64(id))
		}
	}
	tp.narrow = agg != nil && p.Columns&^(query.ColTemplate|query.ColTS) == 0
	for _, t := range p.Templates() {
		if t.Decision == query.Scan {
			tp.residual |= t.Columns
			tp.scan = true
		}
	}
	return tp
}

func later(a, b time.Time) time.Time {
	if a.IsZero() || b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// statTime reads a timestamp statistic. Delta writes them in RFC 3339 with
// millisecond precision: a minimum is at or below the true value, a maximum
// may lie up to a millisecond below it (keepTS widens it).
func statTime(v any) (time.Time, bool) {
	str, ok := v.(string)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, str)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

func statIntRange(st delta.Stats, col string) (lo, hi int64, ok bool) {
	lo, ok1 := asInt(st.MinValues[col])
	hi, ok2 := asInt(st.MaxValues[col])
	return lo, hi, ok1 && ok2
}

// anyIn reports whether the sorted ids hold one in [lo, hi].
func anyIn(ids []int64, lo, hi int64) bool {
	i, _ := slices.BinarySearch(ids, lo)
	return i < len(ids) && ids[i] <= hi
}

// keepTS64 applies the time range every row must meet (the plan may have
// settled a template without looking at ts; opts' range is the reader's).
func (s *search) keepTS64(tsMicro int64) bool {
	if !s.since.IsZero() && tsMicro < s.since.UnixMicro() {
		return false
	}
	return s.until.IsZero() || tsMicro < s.until.UnixMicro()
}

// rowsFiltered reports whether keepRow may drop a row.
func (s *search) rowsFiltered() bool {
	return !s.since.IsZero() || !s.until.IsZero() || s.family != nil || s.opts.After != nil
}

// keepRow applies the options' row filters.
func (s *search) keepRow(tsMicro, templateID, seq int64, idx int32) bool {
	return s.keepTS64(tsMicro) && (s.family == nil || s.family[templateID]) && s.opts.After.before(seq, idx)
}

// hitCursor is a decoded, filtered file's selected rows in WAL order, not
// yet emitted: records (recs), or, for SearchRaw over a records v3 file,
// rows of lines (sel, indexes into lines).
type hitCursor struct {
	recs  []Record
	lines *recfile.Lines
	sel   []int32
	// With lines rendered ahead (rawOut.renderAhead): sel's runs, and how
	// many rows of ahead[0] are written.
	ahead []*aheadRun
	at    int
	// renderNext starts rendering the next of ahead's runs not started.
	renderNext func()
}

func (c *hitCursor) empty() bool {
	if c.lines != nil {
		return len(c.sel) == 0
	}
	return len(c.recs) == 0
}

// len is how many rows c has left.
func (c *hitCursor) len() int {
	if c.lines != nil {
		return len(c.sel)
	}
	return len(c.recs)
}

// pos is the place in the WAL of c's k-th next row (head is pos(0)).
func (c *hitCursor) pos(k int) (uint64, uint32) {
	if c.lines != nil {
		return c.lines.Pos(int(c.sel[k]))
	}
	return c.recs[k].WALSeq, c.recs[k].Index
}

// head is the place in the WAL of c's next row.
func (c *hitCursor) head() (uint64, uint32) {
	if c.lines != nil {
		return c.lines.Pos(int(c.sel[0]))
	}
	return c.recs[0].WALSeq, c.recs[0].Index
}

// bound is a place in the WAL: rows before it are emitted before any
// other cursor's.
type bound struct {
	seq uint64
	idx uint32
	set bool // false: no bound
}

// after reports whether (seq, idx) lies before b.
func (b bound) after(seq uint64, idx uint32) bool {
	return !b.set || seq < b.seq || seq == b.seq && idx < b.idx
}

// lower is the lesser of b and (seq, idx).
func (b bound) lower(seq uint64, idx uint32) bound {
	if b.after(seq, idx) {
		return bound{seq, idx, true}
	}
	return b
}

// fileResult is one decoded, filtered file.
type fileResult struct {
	cur  *hitCursor
	err  error
	done chan struct{}
}

// merge decodes files with read a window ahead of the ordered merge and
// hands emit the cursor whose next row comes next in WAL order, with the
// bound its rows may be emitted below (the other cursors' next rows and the
// next file not yet open) and how many rows the search's limit leaves (-1:
// no limit). emit emits one row at least and returns how many it did.
func (s *search) merge(ctx context.Context, read func(context.Context, searchFile) (*hitCursor, error), emit func(*hitCursor, bound, int) (int, error)) error {
	limit := s.limit()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // runs first: stops the dispatcher and workers before wg.Wait
	results := make([]*fileResult, len(s.files))
	for i := range results {
		results[i] = &fileResult{done: make(chan struct{})}
	}
	window := 2 * s.workers
	slots := make(chan struct{}, window)
	jobs := make(chan int)
	for range s.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r := results[i]
				r.cur, r.err = read(ctx, s.files[i])
				close(r.done)
			}
		}()
	}
	wg.Add(1)
	go func() { // dispatch in merge order, at most window files ahead
		defer wg.Done()
		defer close(jobs)
		for i := range s.files {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	h := &curHeap{}
	next, n := 0, 0
	open := func(i int) error {
		r := results[i]
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		<-slots
		if r.err != nil {
			return r.err
		}
		if r.cur != nil && !r.cur.empty() {
			heap.Push(h, r.cur)
		}
		results[i] = nil
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		for next < len(s.files) && (h.Len() == 0 || s.files[next].lo <= headSeq((*h)[0])) {
			if err := open(next); err != nil {
				return err
			}
			next++
		}
		if h.Len() == 0 {
			return nil
		}
		c := (*h)[0]
		var b bound
		for _, k := range []int{1, 2} {
			if k < h.Len() {
				b = b.lower((*h)[k].head())
			}
		}
		if next < len(s.files) {
			b = b.lower(uint64(s.files[next].lo), 0)
		}
		left := -1
		if limit > 0 {
			left = limit - n
		}
		k, err := emit(c, b, left)
		if err != nil {
			return err
		}
		if n += k; limit > 0 && n >= limit {
			return nil
		}
		if !c.empty() {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
}

// headSeq is the wal_seq of c's next row as a file's lo compares to it.
func headSeq(c *hitCursor) int64 {
	seq, _ := c.head()
	return int64(seq)
}

type curHeap []*hitCursor

func (h curHeap) Len() int { return len(h) }
func (h curHeap) Less(i, j int) bool {
	a, ai := h[i].head()
	b, bi := h[j].head()
	return a < b || a == b && ai < bi
}
func (h curHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *curHeap) Push(x any)   { *h = append(*h, x.(*hitCursor)) }
func (h *curHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// readRecords is readFile as a cursor.
func (s *search) readRecords(ctx context.Context, f searchFile) (*hitCursor, error) {
	recs, err := s.readFile(ctx, f)
	return &hitCursor{recs: recs}, err
}

// readLines is readRecords for SearchRaw: a records v3 file's rows are
// decoded to recfile.Lines, nothing rendered, and selected as match
// selects them (only a Scan template's rows are rendered here, to be
// matched); a v2 file is read as readRecords reads it. When the file's
// plan scans, its rows are decoded in file order and only the selected
// ones put in WAL order (a Scan template's rows are mostly not selected).
func (s *search) readLines(ctx context.Context, f searchFile) (*hitCursor, error) {
	m, err := s.openMeta(ctx, f)
	if err != nil {
		return nil, err
	}
	defer m.close()
	if m.v < 3 {
		return s.readRecords(ctx, f)
	}
	tp, skip, err := s.filePlan(f, m.summary)
	if err != nil || skip {
		return nil, err
	}
	f.plan = tp
	lr := newLearner(m, tp)
	// A residual that reads neither source nor attributes is decided on
	// the line alone: it is rendered into line, reused row after row, and
	// no Record is built (scanLine).
	lineOnly := f.plan.residual&(query.ColSource|query.ColAttrs) == 0
	// A version whose residual requires a phrase that can only lie inside
	// a parameter (query.TemplatePlan.Needle) has its rows ruled out by
	// their parameters' values first: a term users type, an id or a name,
	// is mostly in no row of the versions the footers' byte sets leave.
	// The decoder drops the rows its search of each row group's text
	// columns rules out, before it reads the other columns
	// (recfile.Projection.Needle); the rest are looked at one by one
	// (recfile.Lines.MayHold). A version the learner watches is rendered
	// whole.
	var needle func(recfile.Key) *recfile.Needle
	if lineOnly {
		needle = f.needles(lr)
		f.needle = needle
	}
	var l *recfile.Lines
	err = s.decodeWith(ctx, f, true, tp.scan, func(p recfile.Projection) (err error) {
		l, err = m.rd.DecodeLines(s.texts, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	c := &hitCursor{lines: l, sel: make([]int32, 0, l.Len())}
	var rec recfile.Record
	var row fileRow
	var qr query.Record
	keys := l.Keys()
	all := make([]bool, len(keys))                  // by Lines.KeyIndex: the plan takes the version's rows
	plans := make([]*query.TemplatePlan, len(keys)) // by Lines.KeyIndex: the version's plan (nil: missing)
	for i, k := range keys {
		tp := f.plan.plan.Template(k.ID, k.Version)
		all[i] = tp != nil && tp.Decision == query.All
		plans[i] = tp
	}
	filtered := s.rowsFiltered()
	var needles []*recfile.Needle // by Lines.KeyIndex
	if lineOnly {
		needles = make([]*recfile.Needle, len(keys))
		for i, k := range keys {
			needles[i] = needle(k)
		}
	}
	var line, scratch []byte
	for x := range l.Len() {
		ki := l.KeyIndex(x)
		k := keys[ki]
		if all[ki] {
			if !filtered {
				c.sel = append(c.sel, int32(x))
				continue
			}
			seq, idx := l.Pos(x)
			if s.keepRow(floorDiv(l.TS(x), 1000), int64(k.ID), int64(seq), int32(idx)) {
				c.sel = append(c.sel, int32(x))
			}
			continue
		}
		if lineOnly {
			var ok bool
			if n := needles[ki]; n != nil {
				if ok, scratch = l.MayHold(x, n, scratch); !ok {
					continue
				}
			}
			if line, ok, err = s.scanLine(l, x, k, plans[ki], f, lr, &qr, line); err != nil {
				return nil, err
			} else if ok {
				c.sel = append(c.sel, int32(x))
			}
			continue
		}
		// A Scan template (or one the plan lacks): match decides.
		if err := l.Record(&rec, x); err != nil {
			return nil, fmt.Errorf("records file %s: %w", f.add.Path, err)
		}
		lr.add(k, s.texts[k], rec.Line)
		row = v3Row(&rec)
		if _, ok, err := s.match(&row, f, &qr); err != nil {
			return nil, err
		} else if ok {
			c.sel = append(c.sel, int32(x))
		}
	}
	if tp.scan {
		c.sel = l.WALOrdered(c.sel)
	}
	lr.done()
	return c, nil
}

// scanLine is match for row x of l, a row of version k (tp its plan,
// nil when the plan lacks it) whose residual
// reads neither source nor attributes: the line rendered into buf
// (returned for reuse) and handed to the learner, the row filters, then
// the residual on the line, with no Record built.
func (s *search) scanLine(l *recfile.Lines, x int, k recfile.Key, tp *query.TemplatePlan, f searchFile, lr *learner, qr *query.Record, buf []byte) ([]byte, bool, error) {
	buf, err := l.AppendLine(buf[:0], x)
	if err != nil {
		return buf, false, fmt.Errorf("records file %s: %w", f.add.Path, err)
	}
	if lr != nil { // s.texts[k] is a map lookup a row
		lr.add(k, s.texts[k], buf)
	}
	seq, idx := l.Pos(x)
	ts := floorDiv(l.TS(x), 1000)
	if !s.keepRow(ts, int64(k.ID), int64(seq), int32(idx)) {
		return buf, false, nil
	}
	if tp == nil {
		return buf, false, fmt.Errorf("record (%d,%d) in %s: template %d version %d: %w",
			seq, idx, f.add.Path, k.ID, k.Version, ErrTemplateMissing)
	}
	switch tp.Decision {
	case query.None:
		return buf, false, nil
	case query.All:
		return buf, true, nil
	}
	text := tp.Template.Text
	*qr = query.Record{Tenant: f.tenant, TS: time.UnixMicro(ts).UTC(), TemplateID: k.ID,
		TemplateVersion: k.Version, Template: text, Line: buf}
	if tp.ReadsParams() {
		qr.Params = splitParams(text, string(buf))
	}
	return buf, tp.Match(qr), nil
}

// learner gathers, while readLines renders a cached file's Scan rows (or
// readFile its decoded records), the
// parameter bytes of the versions its summary gives no byte set
// (AnyBytes: fewer than 64 rows in the file), and hands the cache those
// whose every row it saw (the summary's count) and split against the
// template text. A byte set so learned is the one the writer would have
// stored: a parameter split differently from the miner's still renders the
// same line, so a term the line holds can still be formed.
type learner struct {
	footer *cachedFooter
	want   map[recfile.Key]int64 // rows per AnyBytes version
	seen   map[recfile.Key]*learnt
}

type learnt struct {
	rows int64
	cs   byteset.Set
	bad  bool // a line that does not split: nothing learned
}

func newLearner(m *fileMeta, tp *tenantPlan) *learner {
	if m.footer == nil || !tp.scan {
		return nil
	}
	var want map[recfile.Key]int64
	for _, t := range m.summary {
		if t.AnyBytes {
			if want == nil {
				want = map[recfile.Key]int64{}
			}
			want[t.Key] = t.Rows
		}
	}
	if want == nil {
		return nil
	}
	return &learner{footer: m.footer, want: want, seen: map[recfile.Key]*learnt{}}
}

// wants reports whether lr gathers version k's rows (nil wants none).
func (lr *learner) wants(k recfile.Key) bool {
	if lr == nil {
		return false
	}
	_, ok := lr.want[k]
	return ok
}

func (lr *learner) add(k recfile.Key, text string, line []byte) {
	if lr == nil {
		return
	}
	if _, ok := lr.want[k]; !ok {
		return
	}
	t := lr.seen[k]
	if t == nil {
		t = &learnt{}
		lr.seen[k] = t
	}
	t.rows++
	if t.bad {
		return
	}
	params := splitParams(text, string(line))
	if params == nil {
		t.bad = true
		return
	}
	for _, p := range params {
		t.cs.AddString(p)
	}
}

func (lr *learner) done() {
	if lr == nil {
		return
	}
	sets := map[recfile.Key]byteset.Set{}
	for k, t := range lr.seen {
		if !t.bad && t.rows == lr.want[k] {
			sets[k] = t.cs
		}
	}
	if len(sets) > 0 {
		lr.footer.learn(sets)
	}
}

// needles is what a file's rows are ruled out by before their lines are
// rendered: for each template version the Needle of its plan
// (query.TemplatePlan.Needle), nil for versions without one and for those
// lr learns from (it needs every row's line). One per file: a Needle is
// one goroutine's.
func (f searchFile) needles(lr *learner) func(recfile.Key) *recfile.Needle {
	made := map[string]*recfile.Needle{}
	return func(k recfile.Key) *recfile.Needle {
		tp := f.plan.plan.Template(k.ID, k.Version)
		if tp == nil || lr.wants(k) {
			return nil
		}
		b := tp.Needle()
		if b == nil {
			return nil
		}
		if made[string(b)] == nil {
			made[string(b)] = recfile.NewNeedle(b)
		}
		return made[string(b)]
	}
}

// readFile decodes one file and returns the records the plan selects, in
// WAL order. A records v3 file is decoded column by column
// (recfile.DecodeProjected) and only for the template versions the plan,
// narrowed by the file's summary (filePlan), may match; a file the summary
// rules out is not read past its footer. A v2 file is streamed as Query
// does.
func (s *search) readFile(ctx context.Context, f searchFile) ([]Record, error) {
	m, err := s.openMeta(ctx, f)
	if err != nil {
		return nil, err
	}
	defer m.close()
	if m.v >= 3 {
		tp, skip, err := s.filePlan(f, m.summary)
		if err != nil || skip {
			return nil, err
		}
		f.plan = tp
		lr := newLearner(m, tp)
		f.needle = f.needles(lr)
		recs, err := s.decodeV3(ctx, f, m, true, true)
		if err != nil {
			return nil, err
		}
		for i := range recs {
			k := recfile.Key{ID: recs[i].TemplateID, Version: recs[i].TemplateVersion}
			lr.add(k, s.texts[k], recs[i].Line)
		}
		lr.done()
		return s.readV3(f, recs)
	}
	r := parquet.NewGenericReader[RecordRow](m.pf)
	defer r.Close()
	src := &v2Source{r: r, closeFn: r.Close}
	var out []Record
	buf := make([]fileRow, cursorBatch)
	var prev fileRow
	started := false
	var qr query.Record
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, err := src.read(buf)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f.add.Path, err)
		}
		if n == 0 {
			return out, nil
		}
		for i := range buf[:n] {
			row := &buf[i]
			if started && less(*row, prev) {
				return nil, fmt.Errorf("records file %s is not sorted by (wal_seq, record_index): (%d,%d) after (%d,%d)",
					f.add.Path, row.WALSeq, row.Index, prev.WALSeq, prev.Index)
			}
			started, prev = true, *row
			rec, ok, err := s.match(row, f, &qr)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, rec)
			}
			*row = fileRow{}
		}
	}
}

// readV3 selects from a decoded v3 file's records (in the file's order, of
// the versions the plan may match), in WAL order (recfile.WALOrder: each
// record is moved once, into its Record).
func (s *search) readV3(f searchFile, recs []recfile.Record) ([]Record, error) {
	out := make([]Record, 0, len(recs))
	var qr query.Record
	var row fileRow
	order := recfile.WALOrder(recs)
	for x := range recs {
		i := x
		if order != nil {
			i = int(order[x])
		}
		row = v3Row(&recs[i])
		rec, ok, err := s.match(&row, f, &qr)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, rec)
		}
	}
	return out, nil
}

// v3Row is a decoded records v3 record as the row match takes.
func v3Row(r *recfile.Record) fileRow {
	row := fileRow{WALSeq: int64(r.WALSeq), Index: int32(r.Index), TS: floorDiv(r.TS, 1000), TemplateID: int64(r.TemplateID),
		TemplateVersion: int32(r.TemplateVersion), Source: r.Source, Line: r.Line, v3: true}
	if len(r.Attrs) > 0 {
		row.Attrs = make(map[string]string, len(r.Attrs))
		for _, a := range r.Attrs {
			row.Attrs[a.Key] = a.Value
		}
	}
	return row
}

// fileMeta is a records file opened for its footer; its rows are not read.
type fileMeta struct {
	ra   objstore.ReaderAtCloser
	size int64
	pf   *parquet.File
	rd   *recfile.Reader // pf, read by column chunk
	v    int             // records format version
	// summary is a v3 file's template summary (recfile.Summary); nil when
	// it has none (written before summaries) or one this reader does not
	// understand: the file is then read as before, row by row.
	summary recfile.Summary
	// footer is the cache's entry of the file (nil without a cache):
	// where byte sets learned from its rows go.
	footer *cachedFooter
}

func (m *fileMeta) close() { m.ra.Close() }

// openMeta opens a records file of either version and reads its footer.
func (s *search) openMeta(ctx context.Context, f searchFile) (*fileMeta, error) {
	return s.l.openMeta(ctx, f.add.Path)
}

// openMeta opens the records file at rel (a path in the records table) and
// reads its footer, or takes it from the cache (EnableCache).
func (l *Lake) openMeta(ctx context.Context, rel string) (*fileMeta, error) {
	key := l.records.FileKey(rel)
	ra, size, err := l.store.Open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", key, err)
	}
	ck := cacheKey{key, size}
	if c, ok := l.cache.footer(ck); ok {
		return &fileMeta{ra: ra, size: size, pf: c.pf, rd: recfile.ReaderOf(c.pf, ra, size), v: 3, summary: c.currentSummary(), footer: c}, nil
	}
	rd, err := recfile.OpenAt(ra, size)
	if err != nil {
		ra.Close()
		return nil, fmt.Errorf("parquet %s: %w", key, err)
	}
	pf := rd.Parquet()
	v, err := RecordsFileVersion(pf)
	if err != nil {
		ra.Close()
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	m := &fileMeta{ra: ra, size: size, pf: pf, rd: rd, v: v}
	if v >= 3 {
		// A summary that does not parse is ignored: reading every row
		// gives the same answer.
		m.summary, _ = recfile.FileSummary(pf)
		// Only a v3 file's footer is kept: its rows are read through a
		// recfile.Reader at each search's own handle (a v2 file's rows go
		// through pf's).
		if l.cache != nil {
			m.footer = &cachedFooter{pf: pf, summary: m.summary}
			if sets, ok := l.cache.pairs.get(ck); ok {
				m.footer.learnPairs(sets) // learned before the footer was dropped
				m.summary = m.footer.currentSummary()
			}
			l.cache.putFooter(ck, m.footer)
		}
	}
	return m, nil
}

// filePlan narrows f's plan with the file's summary: the query planned over
// the tenant's templates with each version's ParamBytes (and ParamPairs,
// in a file of several row groups at zstd's best level) taken from the
// summary, so that a term no parameter of this file could supply settles
// false for its template. skip reports that no row of the file can match:
// every version the summary lists is None or outside opts' template
// family (the file's ts stats prune by time, in prepare). Without a summary the plan is f.plan and nothing
// is skipped; a version the summary lists that the templates table lacks is
// ErrTemplateMissing, as it is for a row.
func (s *search) filePlan(f searchFile, sum recfile.Summary) (*tenantPlan, bool, error) {
	tp := f.plan
	if sum == nil {
		return tp, false, nil
	}
	if tp.scan {
		chars := make(map[recfile.Key]*byteset.Set, len(sum))
		pairs := map[recfile.Key]query.PairSet{}
		for i := range sum {
			if sum[i].AnyBytes {
				continue // any byte may occur: ParamBytes stays nil
			}
			cs := byteset.Set(sum[i].ParamBytes)
			chars[sum[i].Key] = &cs
			if sum[i].ParamPairs != nil {
				pairs[sum[i].Key] = sum[i].ParamPairs
			}
		}
		// The tenant's plan with the file's ParamBytes and ParamPairs:
		// only its Scan templates are settled again
		// (query.Plan.WithParamBytes).
		p := tp.plan.WithParamBytes(f.tenant, func(id uint64, v uint32) (*byteset.Set, query.PairSet) {
			k := recfile.Key{ID: id, Version: v}
			return chars[k], pairs[k]
		})
		tp = s.tenantPlanOf(p, s.q.NewAggregator())
	}
	skip := true
	for i := range sum {
		t := &sum[i]
		if s.family != nil && !s.family[int64(t.Key.ID)] {
			continue
		}
		p := tp.plan.Template(t.Key.ID, t.Key.Version)
		if p == nil {
			return nil, false, fmt.Errorf("records file %s: template %d version %d: %w", f.add.Path, t.Key.ID, t.Key.Version, ErrTemplateMissing)
		}
		if p.Decision != query.None {
			skip = false
		}
	}
	return tp, skip, nil
}

// fileWithinTS reports whether every row of the file lies in the time
// range, by its ts stats; false without stats.
func (s *search) fileWithinTS(a delta.Add) bool {
	if s.since.IsZero() && s.until.IsZero() {
		return true
	}
	st, err := delta.ParseStats(a.Stats)
	return err == nil && FileWithinTimeRange(st, s.since, s.until)
}

// decodeV3 decodes the rows of a v3 file of the template versions f.plan
// may match, reading only the column chunks they need (recfile.Reader);
// lines false reads no parameter and renders no line; fileOrder leaves the
// records in the file's order (recfile.Projection.FileOrder).
func (s *search) decodeV3(ctx context.Context, f searchFile, m *fileMeta, lines, fileOrder bool) ([]recfile.Record, error) {
	var recs []recfile.Record
	err := s.decodeWith(ctx, f, lines, fileOrder, func(p recfile.Projection) (err error) {
		recs, err = m.rd.DecodeProjected(s.texts, p)
		return err
	})
	return recs, err
}

// decodeWith calls decode with the projection of the template versions
// f.plan may match (decodeV3) and reports a version the templates table
// lacks as ErrTemplateMissing.
func (s *search) decodeWith(ctx context.Context, f searchFile, lines, fileOrder bool, decode func(recfile.Projection) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var missing *recfile.Key
	keep := func(k recfile.Key) bool {
		if s.family != nil && !s.family[int64(k.ID)] {
			return false
		}
		tp := f.plan.plan.Template(k.ID, k.Version)
		if tp == nil {
			if missing == nil {
				missing = &k
			}
			return false
		}
		return tp.Decision != query.None
	}
	c := f.plan.residual
	if agg := s.q.NewAggregator(); agg != nil {
		c |= agg.Columns()
	}
	err := decode(recfile.Projection{Keep: keep, Lines: lines, FileOrder: fileOrder, Needle: f.needle,
		Source: c&query.ColSource != 0 || !s.opts.LineOnly, Attrs: c&query.ColAttrs != 0 || !s.opts.LineOnly})
	var mt *recfile.MissingTemplateError
	if errors.As(err, &mt) {
		return fmt.Errorf("records file %s: template %d version %d: %w", f.add.Path, mt.Key.ID, mt.Key.Version, ErrTemplateMissing)
	}
	if err != nil {
		return fmt.Errorf("records file %s: %w", f.add.Path, err)
	}
	if missing != nil {
		return fmt.Errorf("records file %s: template %d version %d: %w", f.add.Path, missing.ID, missing.Version, ErrTemplateMissing)
	}
	return nil
}

// match decides one row and, when it matches, builds its Record.
func (s *search) match(row *fileRow, f searchFile, qr *query.Record) (Record, bool, error) {
	if !s.keepRow(row.TS, row.TemplateID, row.WALSeq, row.Index) {
		return Record{}, false, nil
	}
	tp := f.plan.plan.Template(uint64(row.TemplateID), uint32(row.TemplateVersion))
	if tp == nil {
		return Record{}, false, fmt.Errorf("record (%d,%d) in %s: template %d version %d: %w",
			row.WALSeq, row.Index, f.add.Path, row.TemplateID, row.TemplateVersion, ErrTemplateMissing)
	}
	if tp.Decision == query.None {
		return Record{}, false, nil
	}
	text := tp.Template.Text
	var line string
	var params []string
	if row.v3 {
		line = unsafe.String(unsafe.SliceData(row.Line), len(row.Line)) // the decoder never reuses a line's bytes
	} else {
		var err error
		if line, err = render(text, row.Params); err != nil {
			return Record{}, false, fmt.Errorf("record (%d,%d) in %s: %w", row.WALSeq, row.Index, f.add.Path, err)
		}
		params = row.Params
	}
	ts := time.UnixMicro(row.TS).UTC()
	if tp.Decision == query.Scan {
		if row.v3 && tp.ReadsParams() {
			params = splitParams(text, line)
		}
		*qr = query.Record{Tenant: f.tenant, Source: row.Source, TS: ts, TemplateID: uint64(row.TemplateID),
			TemplateVersion: uint32(row.TemplateVersion), Template: text, Params: params, Attrs: row.Attrs}
		if row.v3 {
			qr.Line = row.Line
		}
		if !tp.Match(qr) {
			return Record{}, false, nil
		}
	}
	if !s.opts.LineOnly && params == nil {
		params = splitParams(text, line)
	}
	if s.opts.LineOnly {
		params = nil
	}
	return Record{
		WALSeq: uint64(row.WALSeq), Index: uint32(row.Index), Tenant: f.tenant, TS: ts,
		TemplateID: uint64(row.TemplateID), TemplateVersion: uint32(row.TemplateVersion), Params: params,
		Attrs: row.Attrs, Source: row.Source, Line: line,
	}, true, nil
}

// narrowRow is the projection a count by template or time bucket reads.
type narrowRow struct {
	WALSeq          int64 `parquet:"wal_seq"`
	RecordIndex     int32 `parquet:"record_index"`
	TS              int64 `parquet:"ts,timestamp(microsecond:utc)"`
	TemplateID      int64 `parquet:"template_id"`
	TemplateVersion int32 `parquet:"template_version"`
}

// aggregate counts every file with a worker pool, one aggregator each.
func (s *search) aggregate(ctx context.Context) ([]*query.Aggregator, error) {
	jobs := make(chan int)
	aggs := make([]*query.Aggregator, s.workers)
	errs := make([]error, s.workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for w := range s.workers {
		aggs[w] = s.q.NewAggregator()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := s.aggregateFile(ctx, s.files[i], aggs[w]); err != nil {
					errs[w] = err
					cancel()
					for range jobs {
					}
					return
				}
			}
		}()
	}
	for i := range s.files {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return aggs, ctx.Err()
}

func (s *search) aggregateFile(ctx context.Context, f searchFile, agg *query.Aggregator) error {
	if f.plan.narrow {
		return s.aggregateNarrow(ctx, f, agg)
	}
	recs, err := s.readFile(ctx, f)
	if err != nil {
		return err
	}
	var qr query.Record
	for i := range recs {
		r := &recs[i]
		qr = query.Record{Tenant: r.Tenant, Source: r.Source, TS: r.TS, TemplateID: r.TemplateID,
			TemplateVersion: r.TemplateVersion, Params: r.Params, Attrs: r.Attrs}
		if tp := f.plan.plan.Template(r.TemplateID, r.TemplateVersion); tp != nil {
			qr.Template = tp.Template.Text
		}
		agg.Add(&qr)
	}
	return nil
}

// aggregateNarrow counts a file reading only wal_seq, record_index, ts,
// template_id and template_version (and source and attrs for a v3 file when
// the plan needs them, which narrow excludes), or only its footer when its
// summary answers the count (countSummary).
func (s *search) aggregateNarrow(ctx context.Context, f searchFile, agg *query.Aggregator) error {
	m, err := s.openMeta(ctx, f)
	if err != nil {
		return err
	}
	defer m.close()
	if m.v >= 3 {
		tp, skip, err := s.filePlan(f, m.summary)
		if err != nil || skip {
			return err
		}
		f.plan = tp
		if s.countSummary(f, m.summary, agg) {
			return nil
		}
		recs, err := s.decodeV3(ctx, f, m, false, true) // counted: any order
		if err != nil {
			return err
		}
		var qr query.Record
		for i := range recs {
			r := &recs[i]
			ts := floorDiv(r.TS, 1000)
			if !s.keepRow(ts, int64(r.TemplateID), int64(r.WALSeq), int32(r.Index)) {
				continue
			}
			tp := f.plan.plan.Template(r.TemplateID, r.TemplateVersion) // not nil: decodeV3 kept only planned versions
			qr = query.Record{Tenant: f.tenant, TS: time.UnixMicro(ts).UTC(), TemplateID: r.TemplateID, TemplateVersion: r.TemplateVersion}
			if tp.Decision == query.Scan && !tp.Match(&qr) {
				continue
			}
			agg.Add(&qr)
		}
		return nil
	}
	r := parquet.NewGenericReader[narrowRow](m.pf)
	defer r.Close()
	buf := make([]narrowRow, 4096)
	var qr query.Record
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := r.Read(buf)
		for i := range buf[:n] {
			row := &buf[i]
			if !s.keepRow(row.TS, row.TemplateID, row.WALSeq, row.RecordIndex) {
				continue
			}
			tp := f.plan.plan.Template(uint64(row.TemplateID), uint32(row.TemplateVersion))
			if tp == nil {
				return fmt.Errorf("record (%d,%d) in %s: template %d version %d: %w",
					row.WALSeq, row.RecordIndex, f.add.Path, row.TemplateID, row.TemplateVersion, ErrTemplateMissing)
			}
			if tp.Decision == query.None {
				continue
			}
			qr = query.Record{Tenant: f.tenant, TS: time.UnixMicro(row.TS).UTC(), TemplateID: uint64(row.TemplateID),
				TemplateVersion: uint32(row.TemplateVersion)}
			if tp.Decision == query.Scan && !tp.Match(&qr) {
				continue
			}
			agg.Add(&qr)
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			return fmt.Errorf("read %s: %w", f.add.Path, rerr)
		}
		if n == 0 {
			return nil
		}
	}
}

// countSummary counts a v3 file's rows from its summary, reading no row,
// when the summary's per-version counts are the answer: the aggregation's
// keys need no field but the template (and tenant), no paging position
// applies, every row of the file lies inside the time range (its ts
// stats), and every version the plan takes (within opts' family) is All.
// It reports whether it counted; if not, agg is unchanged.
func (s *search) countSummary(f searchFile, sum recfile.Summary, agg *query.Aggregator) bool {
	if sum == nil || s.opts.After != nil || agg.Columns()&^query.ColTemplate != 0 || !s.fileWithinTS(f.add) {
		return false
	}
	take := func(t *recfile.TemplateSummary) (bool, bool) { // (counted, exact)
		if s.family != nil && !s.family[int64(t.Key.ID)] {
			return false, true
		}
		p := f.plan.plan.Template(t.Key.ID, t.Key.Version)
		if p == nil || p.Decision == query.None {
			return false, p != nil
		}
		return true, p.Decision == query.All
	}
	for i := range sum {
		if _, exact := take(&sum[i]); !exact {
			return false
		}
	}
	for i := range sum {
		t := &sum[i]
		if ok, _ := take(t); ok && t.Rows > 0 {
			agg.AddN(&query.Record{Tenant: f.tenant, TemplateID: t.Key.ID, TemplateVersion: t.Key.Version}, t.Rows)
		}
	}
	return true
}
