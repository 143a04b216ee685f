package miner

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/quarrylake/quarry/internal/mining"
)

func testModel(t testing.TB, lines ...string) *mining.Model {
	t.Helper()
	m, err := mining.New(mining.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		m.Mine("acme", l, nil)
	}
	return m
}

func TestSnapshotRoundTrip(t *testing.T) {
	st := &State{WALSeq: 42, PrevSeq: 42, Frames: 40, Records: 1000, Quarantined: 3,
		Tenants:      map[string]*TenantCounters{"acme": {Frames: 30, Records: 900, Quarantined: 1}, "globex": {Frames: 10, Records: 100, Quarantined: 2}},
		MiningConfig: miningConfigJSON(mining.DefaultConfig())}
	model := testModel(t, "user alice logged in", "user bob logged in", "disk full")
	blob, err := encodeSnapshot(st, model)
	if err != nil {
		t.Fatal(err)
	}
	again, err := encodeSnapshot(st, model)
	if err != nil || !bytes.Equal(blob, again) {
		t.Fatalf("snapshot encoding is not deterministic (%v)", err)
	}
	got, mb, err := DecodeSnapshot(blob)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("state %+v, want %+v", got, st)
	}
	restored, err := mining.Restore(mining.Config{}, bytes.NewReader(mb))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := model.Mine("acme", "user carol logged in", nil)
	b, _ := restored.Mine("acme", "user carol logged in", nil)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("restored model mines %+v, original %+v", b, a)
	}

	// Every single-byte corruption and every truncation is detected.
	for i := range blob {
		bad := bytes.Clone(blob)
		bad[i] ^= 0x55
		if _, _, err := DecodeSnapshot(bad); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("flipped byte %d: err %v", i, err)
		}
		if _, _, err := DecodeSnapshot(blob[:i]); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("truncated to %d: err %v", i, err)
		}
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	st := &State{WALSeq: 7, PrevSeq: 7, Frames: 7, Records: 70,
		Tenants: map[string]*TenantCounters{"acme": {Frames: 7, Records: 70}}}
	blob, err := encodeSnapshot(st, testModel(f, "a b c", "a b d"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(blob)
	f.Add([]byte("QS\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, mb, err := DecodeSnapshot(b)
		if err != nil {
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("error %v does not wrap ErrBadSnapshot", err)
			}
			return
		}
		if st.PrevSeq > st.WALSeq || len(mb) > len(b) {
			t.Fatalf("accepted inconsistent snapshot %+v", st)
		}
	})
}

// TestSnapshotGoldenBytes pins the miner's part of the snapshot blob in the
// object store (everything but the model, which internal/mining owns): these
// bytes were written before the codec primitives moved to internal/wire.
func TestSnapshotGoldenBytes(t *testing.T) {
	st := &State{WALSeq: 300, PrevSeq: 299, Frames: 40, Records: 1000, Quarantined: 3,
		Tenants:      map[string]*TenantCounters{"globex": {Frames: 10, Records: 100, Quarantined: 2}, "acme": {Frames: 30, Records: 900, Quarantined: 1}},
		MiningConfig: `{"k":1}`}
	model := testModel(t, "user alice logged in", "user bob logged in")
	blob, err := encodeSnapshot(st, model)
	if err != nil {
		t.Fatal(err)
	}
	var mb bytes.Buffer
	if err := model.Snapshot(&mb); err != nil {
		t.Fatal(err)
	}
	want, err := hex.DecodeString("515301ac02ab0228e80703077b226b223a317d020461636d651e84070106676c6f6265780a6402")
	if err != nil {
		t.Fatal(err)
	}
	want = binary.AppendUvarint(want, uint64(mb.Len()))
	want = append(want, mb.Bytes()...)
	want = binary.BigEndian.AppendUint32(want, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)))
	if !bytes.Equal(blob, want) {
		t.Fatalf("snapshot encoding changed:\n got %x\nwant %x", blob, want)
	}
	got, gotModel, err := DecodeSnapshot(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) || !bytes.Equal(gotModel, mb.Bytes()) {
		t.Fatalf("golden snapshot decodes to %+v, want %+v", got, st)
	}
}
