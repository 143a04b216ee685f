package miner

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/streams"
)

// TestRestartAfterWALPurge: a miner restarted after the WAL was purged up to
// its snapshot restores the snapshot and goes on; purged above it, it
// refuses with ErrWALPurged instead of silently skipping messages (which
// would change every later template id).
func TestRestartAfterWALPurge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		below   uint64 // purge the WAL below this sequence; the snapshot is at 3
		wantErr error
	}{
		{name: "purged up to the snapshot", below: 4},
		{name: "purged above the snapshot", below: 5, wantErr: ErrWALPurged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			frames := corpus(21, 6)
			publishFrames(t, e.js, frames[:3])
			r := startMiner(t, e.js, testConfig())
			waitFor(t, 30*time.Second, "batches", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == 3 })
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if names := snapshotList(t, e.js); len(names) == 0 || names[0] != streams.SnapshotName(3) {
				t.Fatalf("snapshots %v, want %s first", names, streams.SnapshotName(3))
			}
			publishFrames(t, e.js, frames[3:])
			wal, err := e.js.Stream(ctxT(t), streams.WALStream)
			if err != nil {
				t.Fatal(err)
			}
			if err := wal.Purge(ctxT(t), jetstream.WithPurgeSequence(tc.below)); err != nil {
				t.Fatal(err)
			}
			r = startMiner(t, e.js, testConfig())
			if tc.wantErr == nil {
				waitFor(t, 30*time.Second, "every batch", func() bool { return streamMsgs(t, e.js, streams.MinedStream) == 6 })
				if err := r.stop(t); err != nil {
					t.Fatal(err)
				}
				return
			}
			select {
			case err := <-r.done:
				r.done <- err
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Run: %v, want %v", err, tc.wantErr)
				}
				if n := streamMsgs(t, e.js, streams.MinedStream); n != 3 {
					t.Fatalf("%d batches after a refused restart, want the 3 of the first run", n)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("miner did not stop")
			}
		})
	}
}
