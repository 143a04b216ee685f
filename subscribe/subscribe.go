package subscribe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/lake"
	"github.com/quarrylake/quarry/internal/objstore"
	"github.com/quarrylake/quarry/internal/query"
	"github.com/quarrylake/quarry/streams"
)

// Config says what to follow and from where.
type Config struct {
	// Lake is the lake URL (s3://bucket/prefix, file:///dir or a path), as
	// for quarry's other commands; S3 settings come from the environment
	// (QUARRY_S3_ENDPOINT, QUARRY_S3_ACCESS_KEY or AWS_ACCESS_KEY_ID, ...).
	// Ignored when Store is set.
	Lake string
	// Store is the lake's object store, for code inside quarry's module.
	Store objstore.Store
	// JS is a JetStream context on quarry's NATS. Optional: without it the
	// subscriber finds new commits by reading the Delta log every
	// PollInterval.
	JS jetstream.JetStream
	// Tenant selects one tenant's records; "" selects every tenant.
	Tenant string
	// Query is a query in quarry's query language (docs/query.md) that
	// records must match; "" matches every record. Aggregations are not
	// allowed.
	Query string
	// From is where to start (default Beginning()).
	From From
	// PollInterval is how often the subscriber looks at the Delta log for a
	// new commit when no notice arrives (default 2s).
	PollInterval time.Duration
	// Log receives warnings (a vanished file skipped, notices lost); default
	// discards them.
	Log *slog.Logger
}

// Record is one committed record.
type Record struct {
	Tenant          string
	WALSeq          uint64
	Index           uint32
	TS              time.Time
	TemplateID      uint64
	TemplateVersion uint32
	// Template is the text of the record's template version.
	Template string
	Params   []string
	Attrs    map[string]string
	Source   string
	// Line is the original line.
	Line string
	// Version is the Delta version of the commit that released the record:
	// the first whose high-water covers its WAL sequence (package doc).
	Version int64
}

// ErrConfig reports a Config that cannot work (a bad tenant or query, no
// lake).
var ErrConfig = errors.New("subscribe config")

// ErrClosed is returned by Next after Close.
var ErrClosed = errors.New("subscription closed")

// ErrExpired reports a starting point the Delta log no longer holds.
var ErrExpired = errors.New("version no longer in the Delta log")

// Subscription delivers records; see the package doc for the contract.
// Next is not safe for concurrent use; Cursor and Close are.
type Subscription struct {
	cfg   Config
	log   *slog.Logger
	lk    *lake.Lake
	files *lake.FileReader
	q     *query.Query

	mu     sync.Mutex
	cur    Cursor
	closed bool

	pool   pool                     // the held files before cur.Version (release.go)
	pooled bool                     // pool is known (built once commit cur.Version exists)
	rel    *release                 // what the commit at cur.Version releases, once read
	recs   []lake.Record            // the rows of the tenant at cur.File, once read
	loaded bool                     // recs belongs to cur.File
	cache  map[string][]lake.Record // rows of files read and still held, by path

	notices *follower
}

// Subscribe opens a subscription. It reads the records table's log to
// resolve From, and does not wait for records.
func Subscribe(ctx context.Context, cfg Config) (*Subscription, error) {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Tenant != "" {
		if err := streams.CheckToken(cfg.Tenant); err != nil {
			return nil, fmt.Errorf("%w: tenant: %w", ErrConfig, err)
		}
	}
	s := &Subscription{cfg: cfg, log: cfg.Log}
	if cfg.Query != "" {
		q, err := query.Compile(cfg.Query)
		if err != nil {
			return nil, fmt.Errorf("%w: query: %w", ErrConfig, err)
		}
		if q.Aggregates() {
			return nil, fmt.Errorf("%w: query %q: a subscription delivers records, it cannot aggregate", ErrConfig, cfg.Query)
		}
		s.q = q
	}
	store := cfg.Store
	if store == nil {
		if cfg.Lake == "" {
			return nil, fmt.Errorf("%w: Lake or Store is required", ErrConfig)
		}
		var err error
		if store, err = objstore.Open(ctx, cfg.Lake, objstore.S3OptionsFromEnv(os.Getenv)); err != nil {
			return nil, fmt.Errorf("open lake %s: %w", cfg.Lake, err)
		}
	}
	s.lk = lake.Open(store)
	s.files = s.lk.NewFileReader()
	start, err := s.resolve(ctx, cfg.From)
	if err != nil {
		return nil, err
	}
	s.cur = start
	if cfg.JS != nil {
		s.notices = &follower{js: cfg.JS, log: s.log, retry: backoff.New(backoff.Default)}
	}
	return s, nil
}

// resolve turns From into the first position.
func (s *Subscription) resolve(ctx context.Context, f From) (Cursor, error) {
	switch f.kind {
	case fromBeginning:
		return Cursor{}, nil
	case fromVersion:
		if f.version < 0 {
			return Cursor{}, fmt.Errorf("from version %d: must not be negative", f.version)
		}
		return Cursor{Version: f.version}, nil
	case fromCursor:
		c := f.cursor
		if c.Version < 0 || c.File < 0 || c.Row < 0 {
			return Cursor{}, fmt.Errorf("%w %s", ErrBadCursor, c)
		}
		return c, nil
	}
	snap, err := s.lk.Records().Snapshot(ctx)
	if err != nil {
		return Cursor{}, fmt.Errorf("records snapshot: %w", err)
	}
	if f.kind == fromNow {
		return Cursor{Version: snap.Version + 1}, nil
	}
	// fromTime: the first version whose commit time is at or after t.
	// Commit times grow with versions, so a binary search reads log2(n)
	// commits.
	lo, hi := int64(0), snap.Version+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		n, err := s.readCommit(ctx, mid)
		if err != nil {
			return Cursor{}, err
		}
		if n.CommitTime.Before(f.t) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return Cursor{Version: lo}, nil
}

// poolBefore is the pool before version v, which is committed: the files
// held after v-1, from the table as of v-1.
func (s *Subscription) poolBefore(ctx context.Context, v int64) (pool, error) {
	if v == 0 {
		return pool{}, nil
	}
	snap, err := s.lk.Records().SnapshotAt(ctx, v-1)
	if errors.Is(err, objstore.ErrNotFound) {
		return pool{}, fmt.Errorf("%w: the records table as of version %d, to start at %d: %w", ErrExpired, v-1, v, err)
	}
	if err != nil {
		return pool{}, fmt.Errorf("records as of version %d: %w", v-1, err)
	}
	return poolAt(snap), nil
}

// Cursor is the position after the last record Next returned.
func (s *Subscription) Cursor() Cursor {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Close ends the subscription; Next then returns ErrClosed. Safe to call
// twice.
func (s *Subscription) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if s.notices != nil {
		s.notices.stop()
	}
	return nil
}

func (s *Subscription) setCursor(c Cursor) {
	s.mu.Lock()
	s.cur = c
	s.mu.Unlock()
}

func (s *Subscription) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Next returns the next record, waiting for the committer when the
// subscriber is at the live edge. It returns ctx's error when ctx ends; the
// cursor then still names the position after the last record returned.
func (s *Subscription) Next(ctx context.Context) (Record, error) {
	for {
		if s.isClosed() {
			return Record{}, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return Record{}, err
		}
		c := s.Cursor()
		if s.rel == nil {
			n, err := s.awaitCommit(ctx, c.Version)
			if err != nil {
				return Record{}, err
			}
			if !s.pooled {
				if s.pool, err = s.poolBefore(ctx, c.Version); err != nil {
					return Record{}, err
				}
				s.pooled = true
			}
			s.rel = s.pool.release(n)
		}
		if c.File >= len(s.rel.tenants) {
			s.pool = s.rel.next
			for path := range s.cache {
				if !s.pool.holds(path) {
					delete(s.cache, path)
				}
			}
			s.rel, s.recs, s.loaded = nil, nil, false
			s.setCursor(Cursor{Version: c.Version + 1})
			continue
		}
		if tenant := s.rel.tenants[c.File]; s.cfg.Tenant != "" && tenant != s.cfg.Tenant {
			s.recs, s.loaded = nil, false
			s.setCursor(Cursor{Version: c.Version, File: c.File + 1})
			continue
		}
		if !s.loaded {
			recs, err := s.readTenant(ctx, s.rel, s.rel.tenants[c.File])
			if err != nil {
				return Record{}, err
			}
			s.recs, s.loaded = recs, true
		}
		if c.Row >= len(s.recs) {
			s.recs, s.loaded = nil, false
			s.setCursor(Cursor{Version: c.Version, File: c.File + 1})
			continue
		}
		r := s.recs[c.Row]
		s.setCursor(Cursor{Version: c.Version, File: c.File, Row: c.Row + 1})
		rec := Record{
			Tenant: r.Tenant, WALSeq: r.WALSeq, Index: r.Index, TS: r.TS, TemplateID: r.TemplateID,
			TemplateVersion: r.TemplateVersion, Params: r.Params, Attrs: r.Attrs, Source: r.Source, Line: r.Line,
			Version: c.Version,
		}
		rec.Template, _ = s.files.Template(r.TemplateID, r.TemplateVersion)
		if s.match(&rec) {
			return rec, nil
		}
	}
}

func (s *Subscription) match(r *Record) bool {
	if s.q == nil {
		return true
	}
	return s.q.Match(&query.Record{
		Tenant: r.Tenant, Source: r.Source, TS: r.TS, TemplateID: r.TemplateID, TemplateVersion: r.TemplateVersion,
		Template: r.Template, Params: r.Params, Attrs: r.Attrs, Line: []byte(r.Line),
	})
}

// readTenant reads the rows rel releases of tenant, in WAL order: its
// files' rows with sequences in each part's range. A commit may release
// one tenant's rows from several files (held ones, date partitions,
// encoder workers), with interleaved WAL sequences.
func (s *Subscription) readTenant(ctx context.Context, rel *release, tenant string) ([]lake.Record, error) {
	var recs []lake.Record
	for _, p := range rel.parts[tenant] {
		rs, ok := s.cache[p.f.Path]
		if !ok {
			var err error
			if rs, err = s.readFile(ctx, p.since, p.f); err != nil {
				return nil, err
			}
			if rel.next.holds(p.f.Path) {
				if s.cache == nil {
					s.cache = map[string][]lake.Record{}
				}
				s.cache[p.f.Path] = rs
			}
		}
		for _, r := range rs {
			if p.keep(r.WALSeq) {
				recs = append(recs, r)
			}
		}
	}
	sortWAL(recs)
	return recs, nil
}

// sortWAL sorts recs in WAL order: (wal_seq, record_index).
func sortWAL(recs []lake.Record) {
	slices.SortStableFunc(recs, func(a, b lake.Record) int {
		if a.WALSeq != b.WALSeq {
			return cmp.Compare(a.WALSeq, b.WALSeq)
		}
		return cmp.Compare(a.Index, b.Index)
	})
}

// readFile reads the records of add, in the table at version. A file gone
// from the store was removed by a later commit and vacuumed: a compaction
// (remove with dataChange=false) moved its rows into the files it added,
// where they are read; a retention removal (dataChange=true) took them
// away, and there is nothing left to deliver.
func (s *Subscription) readFile(ctx context.Context, version int64, add streams.NoticeFile) ([]lake.Record, error) {
	recs, err := s.files.Read(ctx, add.Path, add.Tenant)
	if errors.Is(err, lake.ErrTemplateMissing) {
		recs, err = s.awaitTemplates(ctx, add, err)
	}
	if err == nil || !errors.Is(err, objstore.ErrNotFound) {
		return recs, err
	}
	seqs, perr := streams.ParseSeqs(add.WAL)
	if perr != nil || len(seqs) == 0 {
		return nil, fmt.Errorf("%w (and its WAL sequences %q are unknown, so its rows cannot be found elsewhere)", err, add.WAL)
	}
	recs, found, merr := s.movedRows(ctx, version, add, seqs, 0)
	if merr != nil {
		return nil, merr
	}
	if !found {
		return nil, err // still in the table, or removed by nothing: a real loss
	}
	return recs, nil
}

// awaitTemplates reads add again until the template versions its rows use
// are committed. The committer commits a report's files as soon as it is
// accepted, also above the high-water, so a file may use a template version
// born in an earlier WAL batch that another encoder has not reported yet;
// that version is committed, at the latest, by the commit whose high-water
// covers the file's WAL sequences. Once the high-water covers them, a
// version still missing is an error.
func (s *Subscription) awaitTemplates(ctx context.Context, add streams.NoticeFile, err error) ([]lake.Record, error) {
	seqs, perr := streams.ParseSeqs(add.WAL)
	if perr != nil || len(seqs) == 0 {
		return nil, err
	}
	top := seqs.Top()
	b := backoff.New(backoff.Default)
	for logged := false; ; logged = true {
		hw, herr := s.lk.HighWater(ctx)
		if herr != nil {
			return nil, herr
		}
		if hw >= top {
			return s.files.Read(ctx, add.Path, add.Tenant)
		}
		if !logged {
			s.log.Info("records file uses a template version not committed yet, waiting for the high-water to cover the file",
				"path", add.Path, "high_water", hw, "file_last_wal_seq", top)
		}
		if werr := b.Wait(ctx); werr != nil {
			return nil, werr
		}
		recs, rerr := s.files.Read(ctx, add.Path, add.Tenant)
		if !errors.Is(rerr, lake.ErrTemplateMissing) {
			return recs, rerr
		}
	}
}

// maxMoves bounds how many compactions deep movedRows follows a file.
const maxMoves = 16

// movedRows finds the commit after version that removed file f and returns
// the rows with WAL sequences in seqs from the files that commit added in
// f's partition, in (wal_seq, record_index) order, following those files
// into later compactions when they are gone too. found is false when no
// commit removed f.
func (s *Subscription) movedRows(ctx context.Context, version int64, f streams.NoticeFile, seqs streams.Seqs, depth int) (recs []lake.Record, found bool, err error) {
	snap, err := s.lk.Records().Snapshot(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("records snapshot: %w", err)
	}
	for v := version + 1; v <= snap.Version; v++ {
		n, err := s.readCommit(ctx, v)
		if err != nil {
			return nil, false, err
		}
		i := slices.IndexFunc(n.Removes, func(r streams.NoticeFile) bool { return r.Path == f.Path })
		if i < 0 {
			continue
		}
		// A retention removal (dataChange true): the expired rows are gone;
		// a file it cut (lake.CurrentLayout) has its kept rows in an add
		// of the same commit with dataChange false, read below as a
		// compaction's.
		retained := n.Removes[i].DataChange
		for _, a := range n.Adds {
			if a.DataChange || a.Tenant != f.Tenant || a.Date != f.Date {
				continue
			}
			rs, err := s.files.Read(ctx, a.Path, a.Tenant)
			if errors.Is(err, objstore.ErrNotFound) && depth < maxMoves {
				var ok bool
				if rs, ok, err = s.movedRows(ctx, v, a, seqs, depth+1); err == nil && !ok {
					err = fmt.Errorf("compacted file %s: %w", a.Path, objstore.ErrNotFound)
				}
			}
			if err != nil {
				return nil, false, err
			}
			for _, r := range rs {
				if seqs.Has(r.WALSeq) {
					recs = append(recs, r)
				}
			}
		}
		sortWAL(recs)
		if retained {
			s.log.Warn("records file removed by retention before it was read, its expired rows are gone", "path", f.Path, "version", v, "kept_rows", len(recs))
			return recs, true, nil
		}
		s.log.Info("records file compacted and vacuumed before it was read, its rows read from the compaction", "path", f.Path, "version", v)
		return recs, true, nil
	}
	return nil, false, nil
}

// readCommit reads version v from the Delta log as a notice.
func (s *Subscription) readCommit(ctx context.Context, v int64) (*streams.Notice, error) {
	actions, err := lake.ReadCommit(ctx, s.lk.Records(), v)
	if err != nil {
		return nil, err
	}
	return lake.NoticeOf(streams.TableRecords, v, actions), nil
}

// awaitCommit returns commit v: from the Delta log when it holds it,
// else from a notice once the committer announces it (or the log, polled,
// shows it).
func (s *Subscription) awaitCommit(ctx context.Context, v int64) (*streams.Notice, error) {
	for {
		if n := s.notices.take(v); n != nil {
			return n, nil
		}
		n, err := s.readCommit(ctx, v)
		if err == nil {
			return n, nil
		}
		if !errors.Is(err, objstore.ErrNotFound) {
			return nil, err
		}
		// Not in the log: not committed yet, or cleaned up from it.
		snap, serr := s.lk.Records().Snapshot(ctx)
		if serr != nil {
			return nil, fmt.Errorf("records snapshot: %w", serr)
		}
		if snap.Version >= v {
			// Committed between the two reads, or gone from the log:
			// only a second miss means gone.
			n, err := s.readCommit(ctx, v)
			if err == nil {
				return n, nil
			}
			if !errors.Is(err, objstore.ErrNotFound) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: records version %d (the table is at %d)", ErrExpired, v, snap.Version)
		}
		// At the live edge: wait for a notice of v or later, or the poll.
		if s.notices != nil && s.notices.ensure(ctx) {
			// The follower may have started after v's notice was
			// published: look at the log once more before waiting.
			if n, err := s.readCommit(ctx, v); err == nil {
				return n, nil
			}
		}
		if err := s.notices.wait(ctx, v, s.cfg.PollInterval); err != nil {
			return nil, err
		}
	}
}

// follower follows the records commit notices.
type follower struct {
	js    jetstream.JetStream
	log   *slog.Logger
	retry *backoff.Backoff // waits between attempts to start the consumer

	mu      sync.Mutex
	it      jetstream.MessagesContext
	ch      chan *streams.Notice
	done    chan struct{}
	pending *streams.Notice // the newest notice received, not yet used
	stopped bool
	failing bool // the last attempt to start the consumer failed (warned once)
}

// ensure starts the notice consumer when it is not running; it reports
// whether one runs.
func (f *follower) ensure(ctx context.Context) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	if f.it != nil {
		select {
		case <-f.done:
			f.it = nil // its goroutine ended: start a new one
		default:
			return true
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The last notice, then every new one: the subscriber reads the log
	// after starting, so a notice published before is not missed.
	cons, err := f.js.OrderedConsumer(cctx, streams.NoticeStream, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{streams.NoticeSubject(streams.TableRecords)},
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		MaxResetAttempts:  streams.OrderedResetAttempts,
		InactiveThreshold: time.Minute,
	})
	var it jetstream.MessagesContext
	if err == nil {
		it, err = cons.Messages()
	}
	if err != nil {
		if !f.failing {
			f.log.Warn("commit notice consumer, polling the Delta log instead", "err", err)
		}
		f.failing = true
		f.ch, f.done = nil, nil
		return false
	}
	f.failing = false
	f.retry.Reset()
	f.it, f.ch, f.done = it, make(chan *streams.Notice, 64), make(chan struct{})
	go f.run(it, f.ch, f.done)
	return true
}

func (f *follower) run(it jetstream.MessagesContext, ch chan *streams.Notice, done chan struct{}) {
	defer close(done)
	for {
		m, err := it.Next()
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				f.log.Warn("commit notices", "err", err)
			}
			return
		}
		n, err := streams.DecodeNotice(m.Data())
		if err != nil {
			f.log.Warn("undecodable commit notice, ignored", "err", err)
			continue
		}
		select {
		case ch <- n:
		default:
			// The subscriber is behind by a whole buffer: it reads the
			// log, and only the newest notice matters to wake it.
			select {
			case <-ch:
			default:
			}
			ch <- n
		}
	}
}

// take returns the buffered notice of version v, if any, dropping older
// ones.
func (f *follower) take(v int64) *streams.Notice {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		if f.pending != nil && f.pending.Version >= v {
			if f.pending.Version == v {
				n := f.pending
				f.pending = nil
				return n
			}
			return nil // a later version: v is read from the log
		}
		select {
		case n := <-f.ch:
			f.pending = n
		default:
			return nil
		}
	}
}

// wait returns when a notice of version v or later arrives, or after poll
// (after a short backoff when no notice consumer runs).
func (f *follower) wait(ctx context.Context, v int64, poll time.Duration) error {
	t := time.NewTimer(poll)
	defer t.Stop()
	var ch chan *streams.Notice
	if f != nil {
		f.mu.Lock()
		if f.pending != nil && f.pending.Version >= v {
			f.mu.Unlock()
			return nil
		}
		ch = f.ch
		if f.it == nil && !f.stopped {
			// No consumer (NATS unreachable, or it just ended): try
			// again soon rather than after a whole poll interval.
			t.Reset(min(poll, f.retry.Next()))
		}
		f.mu.Unlock()
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		case n := <-ch:
			f.mu.Lock()
			f.pending = n
			f.mu.Unlock()
			if n.Version >= v {
				return nil
			}
		}
	}
}

func (f *follower) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	if f.it != nil {
		f.it.Stop()
		f.it = nil
	}
}
