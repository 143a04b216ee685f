package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// SnapshotObject is one object of SnapshotBucket as its meta message
// describes it: a snapshot, or the delete marker of one.
type SnapshotObject struct {
	Name    string
	Deleted bool
	subject string // its meta subject in the bucket's stream
}

// snapshotMetaSubjects matches the meta subjects of SnapshotBucket's
// objects ($O.<bucket>.M.<base64url(name)>).
const snapshotMetaSubjects = "$O." + SnapshotBucket + ".M.>"

// ListSnapshots lists SnapshotBucket's objects, delete markers included,
// from its stream: the meta subjects it holds, then the last message of
// each. It does not use the object store's List, whose watcher waits for a
// message reporting nothing more pending: when a meta message it counted is
// removed while it reads (the miner deletes old snapshots and purges their
// markers while the committer lists), that message never comes and List
// waits until its context ends. An object removed during the listing is
// left out. An empty or missing bucket lists nothing.
func ListSnapshots(ctx context.Context, js jetstream.JetStream) ([]SnapshotObject, error) {
	stream, err := snapshotStream(ctx, js)
	if stream == nil || err != nil {
		return nil, err
	}
	return listSnapshots(ctx, stream)
}

// snapshotStream is SnapshotBucket's stream; nil without an error when
// the bucket does not exist.
func snapshotStream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	stream, err := js.Stream(ctx, "OBJ_"+SnapshotBucket)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream of %s: %w", SnapshotBucket, err)
	}
	return stream, nil
}

func listSnapshots(ctx context.Context, stream jetstream.Stream) ([]SnapshotObject, error) {
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(snapshotMetaSubjects))
	if err != nil {
		return nil, fmt.Errorf("subjects of %s: %w", SnapshotBucket, err)
	}
	subjects := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		subjects = append(subjects, subj)
	}
	slices.Sort(subjects)
	out := make([]SnapshotObject, 0, len(subjects))
	for _, subj := range subjects {
		msg, err := stream.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // removed since the subjects were read
		}
		if err != nil {
			return nil, fmt.Errorf("meta of %s in %s: %w", subj, SnapshotBucket, err)
		}
		var meta jetstream.ObjectInfo
		if err := json.Unmarshal(msg.Data, &meta); err != nil {
			return nil, fmt.Errorf("meta of %s in %s: %w", subj, SnapshotBucket, err)
		}
		out = append(out, SnapshotObject{Name: meta.Name, Deleted: meta.Deleted, subject: subj})
	}
	return out, nil
}

// DropSnapshotDeleteMarkers purges the delete markers of deleted miner
// snapshots from SnapshotBucket's stream. An object store keeps, for every
// object ever deleted, a meta message marking it deleted; snapshot names
// are unique (one per sequence), so without this the bucket grows by one
// marker per snapshot taken, and every listing (the miner's, the
// committer's purge) reads them all. A missing marker reads as a missing
// object, which a deleted snapshot is. It returns how many it purged.
func DropSnapshotDeleteMarkers(ctx context.Context, js jetstream.JetStream) (int, error) {
	stream, err := snapshotStream(ctx, js)
	if stream == nil || err != nil {
		return 0, err
	}
	objs, err := listSnapshots(ctx, stream)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range objs {
		if !o.Deleted {
			continue
		}
		if err := stream.Purge(ctx, jetstream.WithPurgeSubject(o.subject)); err != nil {
			return n, fmt.Errorf("purge the delete marker of %s: %w", o.Name, err)
		}
		n++
	}
	return n, nil
}
