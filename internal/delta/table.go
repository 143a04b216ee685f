package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/quarrylake/quarry/internal/backoff"
	"github.com/quarrylake/quarry/internal/objstore"
)

// Table is one Delta table in a store. It caches the state it has replayed
// so repeated Snapshot calls read only new commits; it is safe for
// concurrent use.
type Table struct {
	store objstore.Store
	root  string

	mu    sync.Mutex
	state *state // replayed through state.version; nil until first Snapshot
	// meta is state's metadata, readable without mu (Properties).
	meta atomic.Pointer[Metadata]
}

// OpenTable returns the table at root (a key prefix such as "records";
// "" is the store root). It does no I/O.
func OpenTable(store objstore.Store, root string) *Table {
	return &Table{store: store, root: strings.Trim(root, "/")}
}

// Root is the table's key prefix.
func (t *Table) Root() string { return t.root }

// Store is the table's object store.
func (t *Table) Store() objstore.Store { return t.store }

func (t *Table) key(rel string) string {
	if t.root == "" {
		return rel
	}
	return t.root + "/" + rel
}

// LogDir is the key prefix of the log, with a trailing '/'.
func (t *Table) LogDir() string { return t.key("_delta_log/") }

// CommitKey is the key of version's commit file.
func (t *Table) CommitKey(version int64) string {
	return t.key(fmt.Sprintf("_delta_log/%020d.json", version))
}

// FileKey is the store key of a data file path relative to the table root.
func (t *Table) FileKey(rel string) string { return t.key(rel) }

// Snapshot is the table's state at Version.
type Snapshot struct {
	// Version is the newest commit replayed; -1 when the table has no log.
	Version  int64
	Protocol Protocol
	Metadata Metadata
	// Files are the active files, sorted by path.
	Files []Add
	// Tombstones are the removed files not re-added, sorted by path.
	Tombstones []Remove
	// Txns maps a txn appId to its newest version.
	Txns map[string]int64
	// CommitInfo is the commitInfo of the commit at Version, if it had one.
	CommitInfo CommitInfo
}

// Writable reports whether this package may write the table: its protocol
// must not need a writer version above WriterVersion.
func (s *Snapshot) Writable() error {
	if s.Version < 0 {
		return nil
	}
	if s.Protocol.MinWriterVersion > WriterVersion || len(s.Protocol.WriterFeatures) > 0 {
		return fmt.Errorf("table needs writer version %d (features %v), this writer implements %d: %w",
			s.Protocol.MinWriterVersion, s.Protocol.WriterFeatures, WriterVersion, ErrUnsupported)
	}
	return nil
}

// state is the replayed log, updated in place as new commits are read.
type state struct {
	version    int64
	protocol   *Protocol
	metadata   *Metadata
	files      map[string]Add
	tombstones map[string]Remove
	txns       map[string]int64
	commitInfo CommitInfo
}

func newState() *state {
	return &state{version: -1, files: map[string]Add{}, tombstones: map[string]Remove{}, txns: map[string]int64{}}
}

// apply replays one commit's actions onto s.
func (s *state) apply(version int64, actions []Action) error {
	if err := checkCommit(version, actions); err != nil {
		return err
	}
	s.commitInfo = nil
	for _, a := range actions {
		switch {
		case a.Protocol != nil:
			if a.Protocol.MinReaderVersion > ReaderVersion || len(a.Protocol.ReaderFeatures) > 0 {
				return fmt.Errorf("version %d: table needs reader version %d (features %v), this reader implements %d: %w",
					version, a.Protocol.MinReaderVersion, a.Protocol.ReaderFeatures, ReaderVersion, ErrUnsupported)
			}
			p := *a.Protocol
			s.protocol = &p
		case a.MetaData != nil:
			m := *a.MetaData
			s.metadata = &m
		case a.Add != nil:
			s.files[a.Add.Path] = *a.Add
			delete(s.tombstones, a.Add.Path)
		case a.Remove != nil:
			delete(s.files, a.Remove.Path)
			s.tombstones[a.Remove.Path] = *a.Remove
		case a.Txn != nil:
			s.txns[a.Txn.AppID] = a.Txn.Version
		case a.CommitInfo != nil:
			s.commitInfo = a.CommitInfo
		}
	}
	if s.protocol == nil || s.metadata == nil {
		return fmt.Errorf("version %d: no protocol or metaData at or before it: %w", version, ErrCorrupt)
	}
	s.version = version
	return nil
}

// snapshot copies s into an immutable Snapshot.
func (s *state) snapshot() *Snapshot {
	snap := &Snapshot{Version: s.version, Txns: make(map[string]int64, len(s.txns)), CommitInfo: s.commitInfo}
	if s.version < 0 {
		return snap
	}
	snap.Protocol = *s.protocol
	snap.Metadata = *s.metadata
	snap.Files = make([]Add, 0, len(s.files))
	for _, a := range s.files {
		snap.Files = append(snap.Files, a)
	}
	sort.Slice(snap.Files, func(i, j int) bool { return snap.Files[i].Path < snap.Files[j].Path })
	snap.Tombstones = make([]Remove, 0, len(s.tombstones))
	for _, r := range s.tombstones {
		snap.Tombstones = append(snap.Tombstones, r)
	}
	sort.Slice(snap.Tombstones, func(i, j int) bool { return snap.Tombstones[i].Path < snap.Tombstones[j].Path })
	for k, v := range s.txns {
		snap.Txns[k] = v
	}
	return snap
}

func (s *state) clone() *state {
	c := &state{version: s.version, protocol: s.protocol, metadata: s.metadata, commitInfo: s.commitInfo,
		files: make(map[string]Add, len(s.files)), tombstones: make(map[string]Remove, len(s.tombstones)),
		txns: make(map[string]int64, len(s.txns))}
	for k, v := range s.files {
		c.files[k] = v
	}
	for k, v := range s.tombstones {
		c.tombstones[k] = v
	}
	for k, v := range s.txns {
		c.txns[k] = v
	}
	return c
}

// checkCommit enforces the protocol's per-commit rules: at most one
// protocol and one metaData, at most one txn per appId, at most one add and
// one remove per path, version 0 with protocol and metaData, valid paths.
func checkCommit(version int64, actions []Action) error {
	var protocols, metadatas int
	txns := map[string]bool{}
	adds := map[string]bool{}
	removes := map[string]bool{}
	for i, a := range actions {
		switch a.kind() {
		case "":
			return fmt.Errorf("version %d action %d: must set exactly one field: %w", version, i, ErrCorrupt)
		case "protocol":
			protocols++
		case "metaData":
			metadatas++
			if a.MetaData.ID == "" {
				return fmt.Errorf("version %d: metaData without id: %w", version, ErrCorrupt)
			}
		case "txn":
			if txns[a.Txn.AppID] {
				return fmt.Errorf("version %d: two txn actions for appId %q: %w", version, a.Txn.AppID, ErrCorrupt)
			}
			txns[a.Txn.AppID] = true
		case "add":
			if err := checkPath(a.Add.Path); err != nil {
				return fmt.Errorf("version %d: add: %v: %w", version, err, ErrCorrupt)
			}
			if adds[a.Add.Path] {
				return fmt.Errorf("version %d: %s added twice: %w", version, a.Add.Path, ErrCorrupt)
			}
			adds[a.Add.Path] = true
		case "remove":
			if err := checkPath(a.Remove.Path); err != nil {
				return fmt.Errorf("version %d: remove: %v: %w", version, err, ErrCorrupt)
			}
			if removes[a.Remove.Path] {
				return fmt.Errorf("version %d: %s removed twice: %w", version, a.Remove.Path, ErrCorrupt)
			}
			removes[a.Remove.Path] = true
		}
	}
	if protocols > 1 || metadatas > 1 {
		return fmt.Errorf("version %d: %d protocol and %d metaData actions, at most one each: %w", version, protocols, metadatas, ErrCorrupt)
	}
	if version == 0 && (protocols == 0 || metadatas == 0) {
		return fmt.Errorf("version 0 lacks protocol or metaData: %w", ErrCorrupt)
	}
	return nil
}

// checkPath accepts relative data file paths outside _delta_log.
func checkPath(p string) error {
	if p == "" {
		return errors.New("empty path")
	}
	if strings.Contains(p, "://") || strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q: absolute paths are not supported", p)
	}
	if objstore.ValidateKey(p) != nil {
		return fmt.Errorf("path %q: not a clean relative path", p)
	}
	if p == "_delta_log" || strings.HasPrefix(p, "_delta_log/") {
		return fmt.Errorf("path %q: inside _delta_log", p)
	}
	return nil
}

// parseCommitName returns the version of a "<020d>.json" log file name.
func parseCommitName(name string) (int64, bool) {
	if len(name) != 25 || !strings.HasSuffix(name, ".json") {
		return 0, false
	}
	v, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// readCommit reads and decodes version's commit file.
func (t *Table) readCommit(ctx context.Context, version int64) ([]Action, error) {
	data, err := t.store.Get(ctx, t.CommitKey(version))
	if err != nil {
		return nil, fmt.Errorf("read version %d: %w", version, err)
	}
	actions, err := DecodeCommit(data)
	if err != nil {
		return nil, fmt.Errorf("version %d: %v: %w", version, err, ErrCorrupt)
	}
	return actions, nil
}

// listVersions lists the log's commit versions and its classic checkpoint
// versions, both ascending.
func (t *Table) listVersions(ctx context.Context) (versions, checkpoints []int64, err error) {
	infos, err := t.store.List(ctx, t.LogDir())
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", t.LogDir(), err)
	}
	versions, checkpoints = t.logVersions(infos)
	return versions, checkpoints, nil
}

// logVersions picks the commit versions and the classic checkpoint versions
// out of a listing of the log, both ascending.
func (t *Table) logVersions(infos []objstore.Info) (versions, checkpoints []int64) {
	for _, in := range infos {
		name := path.Base(in.Key)
		if path.Dir(in.Key)+"/" != t.LogDir() && !(t.root == "" && path.Dir(in.Key) == "_delta_log") {
			continue // _sidecars, _staged_commits, ...
		}
		if v, ok := parseCommitName(name); ok {
			versions = append(versions, v)
			continue
		}
		if v, ok := parseCheckpointName(name); ok {
			checkpoints = append(checkpoints, v)
		}
	}
	slices.Sort(versions)
	slices.Sort(checkpoints)
	return versions, checkpoints
}

// Snapshot returns the table's newest state. A table without a log has
// Version -1. The first call lists the log (starting from the newest
// checkpoint, if any); later calls read forward from the cached state.
func (t *Table) Snapshot(ctx context.Context) (*Snapshot, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.snapshotLocked(ctx)
}

func (t *Table) snapshotLocked(ctx context.Context) (*Snapshot, error) {
	var st *state
	if t.state == nil {
		var err error
		st, err = t.replayInitial(ctx)
		if err != nil {
			return nil, err
		}
	} else {
		st = t.state.clone()
	}
	// Read forward: commits are contiguous, so the first missing version
	// ends the log.
	for {
		next := st.version + 1
		actions, err := t.readCommit(ctx, next)
		if errors.Is(err, objstore.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := st.apply(next, actions); err != nil {
			return nil, fmt.Errorf("table %s: %w", t.root, err)
		}
	}
	t.state = st
	t.meta.Store(st.metadata)
	return st.snapshot(), nil
}

// SnapshotAt returns the table's state at version: the files, txns and
// metadata as of that commit. It starts from the cached state when that is
// at or before version, else from the newest checkpoint at or before
// version that reads whole (or version 0), and reads the commits up to
// version. A version after the newest commit, or one the log no longer
// reaches (its commits cleaned up and no checkpoint at or before it), is
// an error wrapping objstore.ErrNotFound.
func (t *Table) SnapshotAt(ctx context.Context, version int64) (*Snapshot, error) {
	if version < 0 {
		return nil, fmt.Errorf("table %s: snapshot at version %d: negative", t.root, version)
	}
	t.mu.Lock()
	var st *state
	if t.state != nil && t.state.version <= version {
		st = t.state.clone()
	}
	t.mu.Unlock()
	if st == nil {
		var err error
		if st, err = t.startAt(ctx, version); err != nil {
			return nil, err
		}
	}
	for v := st.version + 1; v <= version; v++ {
		actions, err := t.readCommit(ctx, v)
		if err != nil {
			return nil, fmt.Errorf("table %s: snapshot at version %d: %w", t.root, version, err)
		}
		if err := st.apply(v, actions); err != nil {
			return nil, fmt.Errorf("table %s: %w", t.root, err)
		}
	}
	return st.snapshot(), nil
}

// startAt is the state SnapshotAt(version) replays from: the checkpoint
// _last_checkpoint names when it is at or before version and reads whole,
// else the newest checkpoint at or before version that reads whole (from
// a listing of the versions just below version, startAtListed), else the
// empty state before version 0.
func (t *Table) startAt(ctx context.Context, version int64) (*state, error) {
	if lc, err := t.readLastCheckpoint(ctx); err == nil && lc.Version <= version {
		if st, n, err := t.readCheckpoint(ctx, lc.Version); err == nil && n == lc.Size {
			return st, nil // the usual case: no listing
		}
	}
	if _, ok := t.store.(objstore.RangeLister); ok {
		return t.startAtListed(ctx, version)
	}
	_, cps, err := t.listVersions(ctx)
	if err != nil {
		return nil, err
	}
	return t.newestCheckpointAt(ctx, cps, version)
}

// startAtListed is startAt's listing on a store that lists from a key: the
// entries of the tailWindow versions up to version, the window doubling
// until it holds a checkpoint at or before version that reads whole or
// reaches the log's first version. A version far below the newest costs
// no listing of what lies above it.
func (t *Table) startAtListed(ctx context.Context, version int64) (*state, error) {
	first, ok, err := t.firstVersionFrom(ctx, 0)
	if err != nil {
		return nil, err
	}
	if !ok || first > version {
		return newState(), nil
	}
	for w := int64(tailWindow); ; w *= 2 {
		from := max(first, version-w)
		infos, err := t.listRange(ctx, from, version)
		if err != nil {
			return nil, err
		}
		_, cps := t.logVersions(infos)
		st, err := t.newestCheckpointAt(ctx, cps, version)
		if err != nil || st.version >= 0 || from == first {
			return st, err
		}
	}
}

// newestCheckpointAt reads the newest of cps at or before version that
// reads whole; the empty state when none does.
func (t *Table) newestCheckpointAt(ctx context.Context, cps []int64, version int64) (*state, error) {
	for i := len(cps) - 1; i >= 0; i-- {
		if cps[i] > version {
			continue
		}
		st, _, err := t.readCheckpoint(ctx, cps[i])
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, objstore.ErrNotFound) {
			return nil, err
		}
	}
	return newState(), nil
}

// replayInitial builds the first state: from the checkpoint _last_checkpoint
// names, read forward without listing the log (snapshotLocked reads the
// commits after it); when that file is missing or names a checkpoint that
// is missing, damaged or not the size it states, from a listing.
func (t *Table) replayInitial(ctx context.Context) (*state, error) {
	lc, err := t.readLastCheckpoint(ctx)
	switch {
	case err == nil:
		st, n, cerr := t.readCheckpoint(ctx, lc.Version)
		if cerr == nil && n == lc.Size {
			return st, nil
		}
		if cerr != nil && !errors.Is(cerr, objstore.ErrNotFound) && !errors.Is(cerr, ErrCorrupt) {
			return nil, cerr // transient: retry rather than replay everything
		}
	case !errors.Is(err, objstore.ErrNotFound) && !errors.Is(err, ErrCorrupt):
		return nil, fmt.Errorf("read %s: %w", t.LastCheckpointKey(), err)
	}
	return t.replayFromListing(ctx)
}

// replayFromListing lists the log and starts from the newest checkpoint that
// reads whole, falling back to older ones and then to version 0; it fails
// only when no start point reaches the newest version without a gap. It
// lists the tail of the log (replayFromTail), or all of it when the store
// cannot list from a key.
func (t *Table) replayFromListing(ctx context.Context) (*state, error) {
	if _, ok := t.store.(objstore.RangeLister); ok {
		return t.replayFromTail(ctx)
	}
	versions, cps, err := t.listVersions(ctx)
	if err != nil {
		return nil, err
	}
	return t.replayListed(ctx, versions, cps)
}

// replayListed replays the log from the start point startState picks among
// the listed versions and checkpoints.
func (t *Table) replayListed(ctx context.Context, versions, cps []int64) (*state, error) {
	st, start, cpErrs, err := t.startState(ctx, versions, cps)
	if err != nil {
		return nil, err
	}
	expect := start
	for _, v := range versions {
		if v < start {
			continue
		}
		if v != expect {
			return nil, fmt.Errorf("table %s: version %d missing (next present is %d): %w", t.root, expect, v, ErrCorrupt)
		}
		expect++
	}
	for v := start; v < expect; v++ {
		actions, err := t.readCommit(ctx, v)
		if err != nil {
			return nil, errors.Join(append([]error{err}, cpErrs...)...)
		}
		if err := st.apply(v, actions); err != nil {
			return nil, fmt.Errorf("table %s: %w", t.root, err)
		}
	}
	return st, nil
}

// startState picks where replay starts: the newest checkpoint that reads
// whole, else version 0 when the log starts there (or there is no log). It returns the state, the first
// version to replay after it and the errors of the checkpoints it skipped.
func (t *Table) startState(ctx context.Context, versions, cps []int64) (*state, int64, []error, error) {
	present := make(map[int64]bool, len(versions))
	for _, v := range versions {
		present[v] = true
	}
	var cpErrs []error
	for i := len(cps) - 1; i >= 0; i-- {
		st, _, err := t.readCheckpoint(ctx, cps[i])
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, objstore.ErrNotFound) {
				return nil, 0, nil, err
			}
			cpErrs = append(cpErrs, err)
			continue
		}
		return st, cps[i] + 1, cpErrs, nil
	}
	// A log whose first entry is not version 0 (commits cleaned up below a
	// checkpoint, or only a checkpoint left) has no start without one.
	if (len(versions) > 0 || len(cps) > 0) && !present[0] {
		first := int64(-1)
		if len(versions) > 0 {
			first = versions[0]
		}
		if len(cps) > 0 && (first < 0 || cps[0] < first) {
			first = cps[0]
		}
		return nil, 0, nil, errors.Join(append([]error{fmt.Errorf("table %s: log starts at version %d without a readable checkpoint: %w",
			t.root, first, ErrCorrupt)}, cpErrs...)...)
	}
	return newState(), 0, cpErrs, nil
}

// Commit writes version's commit file create-only. It adds a commitInfo (as
// the first action) with a timestamp and a unique txnId when actions have
// none, and a txnId to the caller's commitInfo. It returns ErrVersionExists
// when another writer wrote version first. Transient store errors are
// retried with the same bytes; an attempt whose reply was lost is recognized
// by reading the file back, so a nil error means this call's commit is the
// version.
//
// Commit checks the commit's own consistency (one protocol/metaData, one txn
// per appId, unique paths, version 0 with protocol and metaData) but not the
// table's state: callers replay a Snapshot first, check Writable and pick
// version = Snapshot.Version+1.
func (t *Table) Commit(ctx context.Context, version int64, actions []Action) error {
	if version < 0 {
		return fmt.Errorf("commit version %d: negative", version)
	}
	actions = withCommitInfo(actions)
	if err := checkCommit(version, actions); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	data, err := EncodeCommit(actions)
	if err != nil {
		return fmt.Errorf("commit version %d: %w", version, err)
	}
	key := t.CommitKey(version)
	const attempts = 5
	var lastErr error
	wait := backoff.New(backoff.Policy{Min: 200 * time.Millisecond, Max: 100 << (attempts - 1) * time.Millisecond})
	for attempt := 0; attempt < attempts; attempt++ {
		if attempt > 0 && wait.Wait(ctx) != nil {
			return fmt.Errorf("commit version %d: %w (last error: %v)", version, ctx.Err(), lastErr)
		}
		err := t.store.PutIfAbsent(ctx, key, data)
		if err == nil {
			return nil
		}
		if !errors.Is(err, objstore.ErrExists) {
			// Not a conflict: retry with the same bytes; if this attempt
			// landed after all, the next one finds our own bytes.
			lastErr = err
			continue
		}
		existing, gerr := t.store.Get(ctx, key)
		if gerr != nil {
			lastErr = fmt.Errorf("read back %s: %w", key, gerr)
			continue
		}
		if bytes.Equal(existing, data) {
			return nil // an earlier attempt of this call landed
		}
		return fmt.Errorf("commit version %d of %s: %w", version, t.root, ErrVersionExists)
	}
	return fmt.Errorf("commit version %d of %s: %w", version, t.root, lastErr)
}

// withCommitInfo returns actions with a commitInfo first that carries a
// timestamp and a unique txnId.
func withCommitInfo(actions []Action) []Action {
	out := make([]Action, 0, len(actions)+1)
	var ci CommitInfo
	for _, a := range actions {
		if a.CommitInfo != nil && ci == nil {
			ci = make(CommitInfo, len(a.CommitInfo)+2)
			for k, v := range a.CommitInfo {
				ci[k] = v
			}
			continue
		}
		out = append(out, a)
	}
	if ci == nil {
		ci = CommitInfo{}
	}
	if _, ok := ci["timestamp"]; !ok {
		ci["timestamp"] = time.Now().UnixMilli()
	}
	if _, ok := ci["txnId"]; !ok {
		ci["txnId"] = uuid.NewString()
	}
	if _, ok := ci["engineInfo"]; !ok {
		ci["engineInfo"] = "quarry"
	}
	return append([]Action{{CommitInfo: ci}}, out...)
}

// DefaultProtocol is the protocol quarry's tables are created with.
var DefaultProtocol = Protocol{MinReaderVersion: ReaderVersion, MinWriterVersion: WriterVersion}

// Create writes version 0: the protocol (reader 1, writer 2), md and a
// commitInfo. md.ID defaults to a new UUID, Format to parquet and
// CreatedTime to now. ErrVersionExists when the table exists.
func (t *Table) Create(ctx context.Context, md Metadata) error {
	if md.ID == "" {
		md.ID = uuid.NewString()
	}
	if md.Format.Provider == "" {
		md.Format.Provider = "parquet"
	}
	if md.CreatedTime == 0 {
		md.CreatedTime = time.Now().UnixMilli()
	}
	if md.SchemaString == "" {
		return errors.New("create table: empty schemaString")
	}
	p := DefaultProtocol
	return t.Commit(ctx, 0, []Action{
		{CommitInfo: CommitInfo{"operation": "CREATE TABLE", "operationParameters": map[string]any{
			"partitionBy": md.PartitionColumns}}},
		{Protocol: &p},
		{MetaData: &md},
	})
}
