package miner

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/quarrylake/quarry/internal/mining"
	"github.com/quarrylake/quarry/internal/wire"
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
	e := wire.Encoder{B: make([]byte, 0, mb.Len()+256+len(st.Tenants)*48)}
	e.U8(snapMagic0)
	e.U8(snapMagic1)
	e.U8(snapVersion)
	e.Uvarint(st.WALSeq)
	e.Uvarint(st.PrevSeq)
	e.Uvarint(st.Frames)
	e.Uvarint(st.Records)
	e.Uvarint(st.Quarantined)
	e.Str(st.MiningConfig)
	names := make([]string, 0, len(st.Tenants))
	for n := range st.Tenants {
		names = append(names, n)
	}
	slices.Sort(names)
	e.Uvarint(uint64(len(names)))
	for _, n := range names {
		tc := st.Tenants[n]
		e.Str(n)
		e.Uvarint(tc.Frames)
		e.Uvarint(tc.Records)
		e.Uvarint(tc.Quarantined)
	}
	e.Bytes(mb.Bytes())
	return binary.BigEndian.AppendUint32(e.B, crc32.Checksum(e.B, castagnoli)), nil
}

// DecodeSnapshot checks and splits a snapshot blob (stored under
// streams.SnapshotName) into the miner state and the model bytes, which
// restore with mining.Restore and the miner's mining config. Errors wrap
// ErrBadSnapshot.
func DecodeSnapshot(b []byte) (*State, []byte, error) {
	if len(b) < 3+4 {
		return nil, nil, fmt.Errorf("%w: %d bytes", ErrBadSnapshot, len(b))
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	d := wire.NewDecoder(body, ErrBadSnapshot)
	if d.Header(snapMagic0, snapMagic1, snapVersion, "snapshot"); d.Err() != nil {
		return nil, nil, d.Err()
	}
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, nil, fmt.Errorf("%w: checksum %08x, want %08x", ErrBadSnapshot, got, sum)
	}
	st := &State{Tenants: map[string]*TenantCounters{}}
	st.WALSeq = d.Uvarint("wal seq")
	st.PrevSeq = d.Uvarint("prev seq")
	st.Frames = d.Uvarint("frames")
	st.Records = d.Uvarint("records")
	st.Quarantined = d.Uvarint("quarantined")
	st.MiningConfig = d.Str("mining config", 0)
	n := d.Count("tenant", 5)
	for i := 0; i < n && d.Err() == nil; i++ {
		name := d.Str("tenant", 0)
		tc := &TenantCounters{Frames: d.Uvarint("tenant frames"), Records: d.Uvarint("tenant records"), Quarantined: d.Uvarint("tenant quarantined")}
		if d.Err() == nil {
			if _, dup := st.Tenants[name]; dup {
				d.Fail(fmt.Sprintf("tenant %q twice", name))
			}
			st.Tenants[name] = tc
		}
	}
	model := d.Bytes("model", 0)
	if err := d.End("model"); err != nil {
		return nil, nil, err
	}
	if st.PrevSeq > st.WALSeq {
		return nil, nil, fmt.Errorf("%w: prev seq %d after wal seq %d", ErrBadSnapshot, st.PrevSeq, st.WALSeq)
	}
	return st, model, nil
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
