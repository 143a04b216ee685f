package miner

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/streams"
)

// ErrBadSnapshot reports a snapshot blob that does not decode.
var ErrBadSnapshot = errors.New("bad miner snapshot")

// ErrNoUsableSnapshot reports snapshots that exist but none of which
// restores. Starting over from WAL sequence 1 would hand out template ids
// the lake already uses, so the miner refuses to start: repair the
// snapshots or, to start over deliberately, delete them.
var ErrNoUsableSnapshot = errors.New("no miner snapshot restores")

// TenantCounters are the miner's running totals of one tenant.
type TenantCounters struct {
	Frames      uint64
	Records     uint64
	Quarantined uint64
}

// State is the miner's own state, saved in every snapshot next to the
// mining model.
type State struct {
	// WALSeq is the last WAL sequence the snapshot covers: every message up
	// to it is mined into the model and its batch acked by the work queue.
	WALSeq uint64
	// PrevSeq is the WALSeq of the last published batch: the PrevSeq of the
	// next batch.
	PrevSeq uint64
	// Frames, Records and Quarantined count WAL messages, mined records and
	// dead-lettered records (or frames) since the first WAL message.
	Frames      uint64
	Records     uint64
	Quarantined uint64
	// Tenants holds per-tenant counters.
	Tenants map[string]*TenantCounters
	// MiningConfig is the JSON of the mining config the model was built
	// with, to detect a config change across a restart.
	MiningConfig string
}

const (
	snapMagic0, snapMagic1 = 'Q', 'S'
	snapVersion            = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeSnapshot writes the snapshot blob: 'Q' 'S' version:u8, walseq,
// prevseq, frames, records, quarantined (uvarints), mining config (str),
// n tenants of (name:str, frames, records, quarantined), model (str: the
// mining.Model snapshot), then crc32c (big endian) of everything before.
// str is a uvarint length and bytes. Tenants are in name order so the blob
// is a pure function of the state.
func encodeSnapshot(st *State, model *mining.Model) ([]byte, error) {
	var mb bytes.Buffer
	if err := model.Snapshot(&mb); err != nil {
		return nil, fmt.Errorf("snapshot model: %w", err)
	}
	b := make([]byte, 0, mb.Len()+256+len(st.Tenants)*48)
	b = append(b, snapMagic0, snapMagic1, snapVersion)
	b = binary.AppendUvarint(b, st.WALSeq)
	b = binary.AppendUvarint(b, st.PrevSeq)
	b = binary.AppendUvarint(b, st.Frames)
	b = binary.AppendUvarint(b, st.Records)
	b = binary.AppendUvarint(b, st.Quarantined)
	b = appendStr(b, st.MiningConfig)
	names := make([]string, 0, len(st.Tenants))
	for n := range st.Tenants {
		names = append(names, n)
	}
	slices.Sort(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		tc := st.Tenants[n]
		b = appendStr(b, n)
		b = binary.AppendUvarint(b, tc.Frames)
		b = binary.AppendUvarint(b, tc.Records)
		b = binary.AppendUvarint(b, tc.Quarantined)
	}
	b = binary.AppendUvarint(b, uint64(mb.Len()))
	b = append(b, mb.Bytes()...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// DecodeSnapshot checks and splits a snapshot blob (stored under
// streams.SnapshotName) into the miner state and the model bytes, which restore
// with mining.Restore and the miner's mining config. Errors wrap
// ErrBadSnapshot.
func DecodeSnapshot(b []byte) (*State, []byte, error) {
	if len(b) < 3+4 {
		return nil, nil, fmt.Errorf("%w: %d bytes", ErrBadSnapshot, len(b))
	}
	if b[0] != snapMagic0 || b[1] != snapMagic1 {
		return nil, nil, fmt.Errorf("%w: magic %q", ErrBadSnapshot, b[:2])
	}
	if b[2] != snapVersion {
		return nil, nil, fmt.Errorf("%w: unsupported version %d", ErrBadSnapshot, b[2])
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, nil, fmt.Errorf("%w: checksum %08x, want %08x", ErrBadSnapshot, got, sum)
	}
	d := snapDec{b: body, off: 3}
	st := &State{Tenants: map[string]*TenantCounters{}}
	st.WALSeq = d.uvarint("wal seq")
	st.PrevSeq = d.uvarint("prev seq")
	st.Frames = d.uvarint("frames")
	st.Records = d.uvarint("records")
	st.Quarantined = d.uvarint("quarantined")
	st.MiningConfig = string(d.bytes("mining config"))
	n := d.uvarint("tenants")
	if d.err == nil && n > uint64(len(body)-d.off)/5 {
		d.fail(fmt.Sprintf("tenant count %d exceeds payload", n))
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		name := string(d.bytes("tenant"))
		tc := &TenantCounters{Frames: d.uvarint("tenant frames"), Records: d.uvarint("tenant records"), Quarantined: d.uvarint("tenant quarantined")}
		if d.err == nil {
			if _, dup := st.Tenants[name]; dup {
				d.fail(fmt.Sprintf("tenant %q twice", name))
			}
			st.Tenants[name] = tc
		}
	}
	model := d.bytes("model")
	if d.err == nil && d.off != len(body) {
		d.fail(fmt.Sprintf("%d trailing bytes", len(body)-d.off))
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	if st.PrevSeq > st.WALSeq {
		return nil, nil, fmt.Errorf("%w: prev seq %d after wal seq %d", ErrBadSnapshot, st.PrevSeq, st.WALSeq)
	}
	return st, model, nil
}

type snapDec struct {
	b   []byte
	off int
	err error
}

func (d *snapDec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", ErrBadSnapshot, what, d.off)
	}
}

func (d *snapDec) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint " + what)
		return 0
	}
	d.off += n
	return v
}

func (d *snapDec) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail(fmt.Sprintf("%s length %d exceeds payload", what, n))
		return nil
	}
	s := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

// miningConfigJSON is the canonical text of a mining config for the
// snapshot's change check.
func miningConfigJSON(c mining.Config) string {
	b, err := json.Marshal(c)
	if err != nil {
		return ""
	}
	return string(b)
}

// snapshotNames lists the miner snapshots in obs, newest first.
func snapshotNames(ctx context.Context, obs jetstream.ObjectStore) ([]string, error) {
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", streams.SnapshotBucket, err)
	}
	type named struct {
		name string
		seq  uint64
	}
	var ns []named
	for _, in := range infos {
		if in.Deleted {
			continue
		}
		if seq, ok := streams.ParseSnapshotName(in.Name); ok {
			ns = append(ns, named{in.Name, seq})
		}
	}
	slices.SortFunc(ns, func(a, b named) int { return -cmpU64(a.seq, b.seq) })
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.name
	}
	return out, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// loadNewest restores the newest snapshot that decodes. A snapshot that
// does not read or decode is skipped with a warning and the next older one
// is tried. No snapshot at all gives (nil, nil, nil): start from scratch;
// snapshots of which none restores give ErrNoUsableSnapshot.
func loadNewest(ctx context.Context, obs jetstream.ObjectStore, cfg mining.Config, log *slog.Logger, onSkip func()) (*State, *mining.Model, error) {
	names, err := snapshotNames(ctx, obs)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range names {
		blob, err := obs.GetBytes(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, fmt.Errorf("read snapshot %s: %w", name, err)
			}
			log.Warn("skip unreadable snapshot", "name", name, "err", err)
			onSkip()
			continue
		}
		st, mb, err := DecodeSnapshot(blob)
		if err != nil {
			log.Warn("skip corrupt snapshot", "name", name, "err", err)
			onSkip()
			continue
		}
		if seq, _ := streams.ParseSnapshotName(name); seq != st.WALSeq {
			log.Warn("skip snapshot whose name and content disagree", "name", name, "wal_seq", st.WALSeq)
			onSkip()
			continue
		}
		model, err := mining.Restore(cfg, bytes.NewReader(mb))
		if err != nil {
			log.Warn("skip snapshot whose model does not restore", "name", name, "err", err)
			onSkip()
			continue
		}
		if want := miningConfigJSON(cfg); st.MiningConfig != want {
			log.Warn("mining config changed since the snapshot: ids after it may differ from the run that wrote it",
				"name", name, "snapshot_config", st.MiningConfig, "config", want)
		}
		return st, model, nil
	}
	if len(names) > 0 {
		return nil, nil, fmt.Errorf("%w: %d snapshots in %s (newest %s) and none restores; starting over would reuse template ids",
			ErrNoUsableSnapshot, len(names), streams.SnapshotBucket, names[0])
	}
	return nil, nil, nil
}

// putSnapshot stores blob under streams.SnapshotName(seq) and deletes all but the
// newest keep snapshots.
func putSnapshot(ctx context.Context, obs jetstream.ObjectStore, seq uint64, blob []byte, keep int, log *slog.Logger) error {
	name := streams.SnapshotName(seq)
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name, Description: "quarry miner snapshot"}, bytes.NewReader(blob)); err != nil {
		return fmt.Errorf("put snapshot %s: %w", name, err)
	}
	names, err := snapshotNames(ctx, obs)
	if err != nil {
		log.Warn("list snapshots to prune", "err", err)
		return nil
	}
	for i, n := range names {
		if i < keep || n == name {
			continue
		}
		if err := obs.Delete(ctx, n); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			log.Warn("delete old snapshot", "name", n, "err", err)
		}
	}
	return nil
}
