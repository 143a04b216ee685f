package streams_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/natstest"
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

// TestListSnapshotsWhileDeleting lists the snapshot bucket while a writer
// does what the miner does (puts a snapshot, deletes the oldest, purges its
// delete marker) and then waits for the listing. The object store's own List
// waited for a message it had counted and that the purge removed, until its
// context ended (the miner's TestSnapshotDeleteMarkersDropped hung on it).
func TestListSnapshotsWhileDeleting(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s.URL(), streams.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	obs, err := js.ObjectStore(ctx, streams.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	if objs, err := streams.ListSnapshots(ctx, js); err != nil || len(objs) != 0 {
		t.Fatalf("empty bucket lists %v, %v", objs, err)
	}
	const keep = 2
	for seq := uint64(1); seq <= 200; seq++ {
		werr := make(chan error, 1)
		go func() {
			if _, err := obs.PutBytes(ctx, streams.SnapshotName(seq), []byte("snapshot")); err != nil {
				werr <- err
				return
			}
			if seq > keep {
				if err := obs.Delete(ctx, streams.SnapshotName(seq-keep)); err != nil {
					werr <- err
					return
				}
			}
			_, err := streams.DropSnapshotDeleteMarkers(ctx, js)
			werr <- err
		}()
		lctx, lcancel := context.WithTimeout(ctx, 20*time.Second)
		objs, err := streams.ListSnapshots(lctx, js)
		lcancel()
		if err != nil {
			t.Fatalf("list during write %d: %v", seq, err)
		}
		for _, o := range objs {
			if n, ok := streams.ParseSnapshotName(o.Name); !ok || n > seq || n+keep+1 < seq {
				t.Fatalf("list during write %d holds %q", seq, o.Name)
			}
		}
		if err := <-werr; err != nil {
			t.Fatalf("write %d: %v", seq, err)
		}
	}
	// Once the writes are done: the kept snapshots, and no marker.
	objs, err := streams.ListSnapshots(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		if o.Deleted {
			t.Errorf("delete marker of %s left", o.Name)
		}
		got = append(got, o.Name)
	}
	if want := []string{streams.SnapshotName(199), streams.SnapshotName(200)}; !slices.Equal(got, want) {
		t.Errorf("listed %q, want %q", got, want)
	}
}
