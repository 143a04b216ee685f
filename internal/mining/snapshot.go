package mining

import (
	"bufio"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// snapshotMagic and snapshotVersion identify the snapshot format and the
// engine that wrote it. The version changes whenever the same lines would
// make other templates (tokenizer, header detection, bucket keys), not only
// when the encoding changes:
//
//	1: before header detection, separated lists and masks
//	2: header detection, ","/";" lists, masks (issue 13)
//	3: a host/IPv4 chunk ("node-1/10.0.0.1", Java's socket address) is
//	   two values, not one; a key's quoted word (tag="x") is a value
//	4: an ISO 8601 date and time with its T ("2026-11-29T00:00:00.010Z")
//	   is one value, not three cut at its colons
//	5: base64 with its padding ("c2lnbmVkIGJ5IHF1YXJyeQ==") is one value,
//	   its '='s included; so are a MAC address (six or more hex pairs) and
//	   an IPv6 address, not the groups their colons cut them into; a
//	   glog/klog severity letter and date ("I1207") starts a header
//
// Restore re-learns the templates of an older engine's snapshot (see
// Restore); it rejects newer versions.
const (
	snapshotMagic         = "quarry-mining"
	snapshotVersion       = 5
	oldestSnapshotVersion = 1
)

type snapSlot struct {
	Start, End int32
	Kind       uint8
	Param      bool
	Prefix     int32
	Mask       uint8 // added later: older snapshots decode as 0 (no mask)
}

type snapCluster struct {
	ID        uint64
	Key       uint64
	Line      string
	Slots     []snapSlot
	Texts     []string
	LastUsed  uint64
	Count     uint64
	Oversized bool
	AliasID   uint64
	Alts      [][]string
	NSib      int
	Anchor    uint64
	Elastic   bool
	Shapes    []uint64
}

type snapTenant struct {
	Name      string
	Evictions uint64
	Clusters  []snapCluster // ascending id
}

type snapState struct {
	Magic     string
	Version   int
	NextID    uint64
	Tick      uint64
	Created   uint64
	Changes   uint64
	Evictions uint64
	Oversized uint64
	Merges    uint64
	Unmatched uint64
	Dropped   uint64       // added in version 2: older snapshots decode as 0
	Tenants   []snapTenant // ascending name
}

// Snapshot writes the whole state of m (templates with every version,
// per-tenant buckets and LRU order, counters) to w. Restore with the same
// Config continues exactly as m would.
func (m *Model) Snapshot(w io.Writer) error {
	st := snapState{
		Magic: snapshotMagic, Version: snapshotVersion,
		NextID: m.nextID, Tick: m.tick, Created: m.created, Changes: m.changes,
		Evictions: m.evictions, Oversized: m.oversized, Merges: m.merges, Unmatched: m.unmatched,
		Dropped: m.dropped,
	}
	names := make([]string, 0, len(m.tenants))
	for n := range m.tenants {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		t := m.tenants[n]
		ts := snapTenant{Name: n, Evictions: t.evictions}
		for c := t.head; c != nil; c = c.next {
			sc := snapCluster{
				ID: c.id, Key: c.key, Line: c.line, Texts: c.texts,
				LastUsed: c.lastUsed, Count: c.count, Oversized: c.oversized,
				AliasID: c.aliasID, Alts: c.alts, NSib: c.nsib,
				Anchor: c.anchor, Elastic: c.elastic, Shapes: c.shapes,
			}
			sc.Slots = make([]snapSlot, len(c.slots))
			for i, s := range c.slots {
				sc.Slots[i] = snapSlot{Start: s.start, End: s.end, Kind: uint8(s.kind), Param: s.param, Prefix: s.prefix, Mask: s.mask}
			}
			ts.Clusters = append(ts.Clusters, sc)
		}
		slices.SortFunc(ts.Clusters, func(a, b snapCluster) int {
			switch {
			case a.ID < b.ID:
				return -1
			case a.ID > b.ID:
				return 1
			}
			return 0
		})
		st.Tenants = append(st.Tenants, ts)
	}
	bw := bufio.NewWriter(w)
	if err := gob.NewEncoder(bw).Encode(&st); err != nil {
		return fmt.Errorf("mining snapshot: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("mining snapshot: %w", err)
	}
	return nil
}

// Restore reads a snapshot written by Snapshot. Given the Config of the
// original model, the restored model continues exactly as the original
// would have: same ids, versions, events and evictions.
//
// A snapshot of an older engine (an older snapshot version) restores its
// counters, tenants and id counter but none of its templates: the old
// templates were made by other tokenization rules, and kept they would
// split every event into an old and a new template. Later lines create
// templates afresh with ids above every old one (ids are never reused), once
// per upgrade; Stats.Dropped counts the templates left behind. A snapshot of
// a newer engine is an error.
func Restore(cfg Config, r io.Reader) (*Model, error) {
	m, err := New(cfg)
	if err != nil {
		return nil, err
	}
	var st snapState
	if err := gob.NewDecoder(bufio.NewReader(r)).Decode(&st); err != nil {
		return nil, fmt.Errorf("mining restore: %w", err)
	}
	if st.Magic != snapshotMagic {
		return nil, fmt.Errorf("mining restore: not a mining snapshot (magic %q)", st.Magic)
	}
	if st.Version < oldestSnapshotVersion || st.Version > snapshotVersion {
		return nil, fmt.Errorf("mining restore: %w: version %d, this engine reads %d to %d",
			ErrSnapshotVersion, st.Version, oldestSnapshotVersion, snapshotVersion)
	}
	m.nextID, m.tick = st.NextID, st.Tick
	m.created, m.changes, m.evictions, m.oversized, m.merges = st.Created, st.Changes, st.Evictions, st.Oversized, st.Merges
	m.unmatched, m.dropped = st.Unmatched, st.Dropped
	relearn := st.Version < snapshotVersion
	for _, ts := range st.Tenants {
		if _, dup := m.tenants[ts.Name]; dup {
			return nil, fmt.Errorf("mining restore: duplicate tenant %q", ts.Name)
		}
		t := &tenant{name: strings.Clone(ts.Name), buckets: make(map[uint64][]*cluster),
			anchors: make(map[uint64][]*cluster), byShape: make(map[uint64][]*cluster), evictions: ts.Evictions,
			set: m.sets[ts.Name]}
		if t.set == nil {
			t.set = m.defSet
		}
		m.tenants[t.name] = t
		if relearn {
			m.dropped += uint64(len(ts.Clusters))
			continue
		}
		lru := make([]*cluster, 0, len(ts.Clusters))
		for _, sc := range ts.Clusters {
			c, err := restoreCluster(sc, st.NextID)
			if err != nil {
				return nil, fmt.Errorf("mining restore: tenant %q: %w", ts.Name, err)
			}
			if _, dup := m.clusters[c.id]; dup {
				return nil, fmt.Errorf("mining restore: duplicate template id %d", c.id)
			}
			c.ten = t
			m.clusters[c.id] = c
			t.n++
			if c.oversized {
				if t.oversized != nil {
					return nil, fmt.Errorf("mining restore: tenant %q has two oversized templates", ts.Name)
				}
				t.oversized = c
			} else if c.aliasID == 0 {
				if c.elastic {
					for _, key := range c.shapes {
						t.indexShape(c, key)
					}
				} else {
					t.buckets[c.key] = append(t.buckets[c.key], c)
				}
				t.index(c)
			}
			lru = append(lru, c)
		}
		// Most recently used first: push in ascending lastUsed order.
		slices.SortFunc(lru, func(a, b *cluster) int {
			switch {
			case a.lastUsed < b.lastUsed:
				return -1
			case a.lastUsed > b.lastUsed:
				return 1
			}
			return 0
		})
		for _, c := range lru {
			t.pushFront(c)
		}
	}
	return m, nil
}

// ErrSnapshotVersion reports a snapshot written by a newer engine (or an
// unknown version): Restore cannot read it.
var ErrSnapshotVersion = errors.New("unsupported mining snapshot version")

func restoreCluster(sc snapCluster, nextID uint64) (*cluster, error) {
	if sc.ID == 0 || sc.ID >= nextID {
		return nil, fmt.Errorf("template id %d out of range", sc.ID)
	}
	if len(sc.Texts) == 0 {
		return nil, fmt.Errorf("template %d has no text", sc.ID)
	}
	c := &cluster{
		id: sc.ID, key: sc.Key, line: sc.Line, texts: sc.Texts,
		lastUsed: sc.LastUsed, count: sc.Count, oversized: sc.Oversized,
		aliasID: sc.AliasID, nsib: sc.NSib,
		anchor: sc.Anchor, elastic: sc.Elastic, shapes: sc.Shapes, words: -1,
	}
	if c.elastic {
		if c.oversized || len(sc.Slots) != 0 {
			return nil, fmt.Errorf("template %d: corrupt elastic template", sc.ID)
		}
		c.pieces = strings.Split(c.text(), Wildcard)
		c.nparams = len(c.pieces) - 1
		return c, nil
	}
	if sc.Alts != nil {
		if len(sc.Alts) != len(sc.Slots) {
			return nil, fmt.Errorf("template %d: %d alternates for %d slots", sc.ID, len(sc.Alts), len(sc.Slots))
		}
		c.alts = sc.Alts
		for i := range c.alts {
			if len(c.alts[i]) == 0 {
				c.alts[i] = nil // gob cannot tell nil from empty
			}
		}
	}
	if c.oversized {
		c.nparams = 1
		return c, nil
	}
	c.slots = make([]slot, len(sc.Slots))
	for i, s := range sc.Slots {
		if s.Start < 0 || s.End < s.Start || int(s.End) > len(sc.Line) || s.Kind > uint8(kVar) ||
			s.Prefix < 0 || s.Prefix > s.End-s.Start || s.Prefix > 0 && !s.Param || s.Mask != 0 && !s.Param {
			return nil, errors.New("corrupt template slot")
		}
		c.slots[i] = slot{start: s.Start, end: s.End, kind: tokKind(s.Kind), param: s.Param, prefix: s.Prefix, mask: s.Mask}
		if s.Param {
			c.nparams++
		}
	}
	if c.buildText() != c.text() {
		return nil, fmt.Errorf("template %d: slots disagree with text", sc.ID)
	}
	return c, nil
}
