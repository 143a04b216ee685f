package streams_test

import (
	"testing"

	"github.com/quarrylake/quarry/streams"
)

func TestSnapshotName(t *testing.T) {
	tests := []struct {
		name string
		seq  uint64
		ok   bool
	}{
		{"miner-00000000000000000000", 0, true},
		{"miner-00000000000000012345", 12345, true},
		{"miner-18446744073709551615", 1<<64 - 1, true},
		{"miner-18446744073709551616", 0, false}, // above the largest uint64
		{"miner-99999999999999999999", 0, false},
		{"miner-123", 0, false},
		{"miner-000000000000000000001", 0, false},
		{"miner-0000000000000000001x", 0, false},
		{"miner-+0000000000000000001", 0, false},
		{"miner--0000000000000000001", 0, false},
		{"miner-", 0, false},
		{"other-00000000000000000001", 0, false},
		{"MINER-00000000000000000001", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		seq, ok := streams.ParseSnapshotName(tt.name)
		if seq != tt.seq || ok != tt.ok {
			t.Errorf("parse %q = %d %v, want %d %v", tt.name, seq, ok, tt.seq, tt.ok)
		}
		if ok && streams.SnapshotName(seq) != tt.name {
			t.Errorf("SnapshotName(%d) = %q, want %q", seq, streams.SnapshotName(seq), tt.name)
		}
	}
	for _, seq := range []uint64{0, 1, 9, 10, 12345, 1<<64 - 1} {
		if got, ok := streams.ParseSnapshotName(streams.SnapshotName(seq)); !ok || got != seq {
			t.Errorf("round trip of %d = %d %v", seq, got, ok)
		}
	}
	if !(streams.SnapshotName(9) < streams.SnapshotName(10)) {
		t.Error("snapshot names do not sort by sequence")
	}
}

func FuzzParseSnapshotName(f *testing.F) {
	f.Add(streams.SnapshotName(0))
	f.Add(streams.SnapshotName(42))
	f.Add(streams.SnapshotName(1<<64 - 1))
	f.Add("miner-99999999999999999999")
	f.Add("miner-12")
	f.Fuzz(func(t *testing.T, name string) {
		seq, ok := streams.ParseSnapshotName(name)
		if !ok {
			if seq != 0 {
				t.Fatalf("rejected %q with sequence %d", name, seq)
			}
			return
		}
		// Only the canonical name of a sequence parses.
		if again := streams.SnapshotName(seq); again != name {
			t.Fatalf("%q parses to %d, whose name is %q", name, seq, again)
		}
	})
}
