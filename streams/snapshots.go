package streams

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// snapshotPrefix starts the object name of every miner snapshot.
const snapshotPrefix = "miner-"

// snapshotDigits is the width of the zero-padded sequence in a snapshot name:
// every uint64 fits, so names sort by sequence.
const snapshotDigits = 20

// SnapshotName is the object name, in SnapshotBucket, of the miner snapshot
// covering WAL sequence seq: "miner-" and seq zero-padded to 20 digits, so
// names sort by sequence. The miner writes it; the committer reads it to
// keep the WAL above the oldest snapshot.
func SnapshotName(seq uint64) string {
	return fmt.Sprintf("%s%0*d", snapshotPrefix, snapshotDigits, seq)
}

// ParseSnapshotName returns the WAL sequence of a SnapshotName, and false for
// any other object name.
func ParseSnapshotName(name string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, snapshotPrefix)
	if !ok || len(rest) != snapshotDigits {
		return 0, false
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] < '0' || rest[i] > '9' {
			return 0, false
		}
	}
	seq, err := strconv.ParseUint(rest, 10, 64)
	if err != nil {
		return 0, false // 20 digits above the largest uint64
	}
	return seq, true
}

// DropSnapshotDeleteMarkers purges the delete markers of deleted miner
// snapshots from SnapshotBucket's stream. An object store keeps, for every
// object ever deleted, a meta message marking it deleted; snapshot names
// are unique (one per sequence), so without this the bucket grows by one
// marker per snapshot taken, and every listing (the miner's, the
// committer's purge) reads them all. A missing marker reads as a missing
// object, which a deleted snapshot is. It returns how many it purged.
func DropSnapshotDeleteMarkers(ctx context.Context, js jetstream.JetStream) (int, error) {
	obs, err := js.ObjectStore(ctx, SnapshotBucket)
	if err != nil {
		return 0, fmt.Errorf("object store %s: %w", SnapshotBucket, err)
	}
	infos, err := obs.List(ctx, jetstream.ListObjectsShowDeleted())
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list %s: %w", SnapshotBucket, err)
	}
	stream, err := js.Stream(ctx, "OBJ_"+SnapshotBucket)
	if err != nil {
		return 0, fmt.Errorf("stream of %s: %w", SnapshotBucket, err)
	}
	n := 0
	for _, in := range infos {
		if !in.Deleted {
			continue
		}
		// The object store's meta subject: $O.<bucket>.M.<base64url(name)>.
		subj := "$O." + SnapshotBucket + ".M." + base64.URLEncoding.EncodeToString([]byte(in.Name))
		if err := stream.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return n, fmt.Errorf("purge the delete marker of %s: %w", in.Name, err)
		}
		n++
	}
	return n, nil
}
