package streams

import (
	"fmt"
	"strconv"
	"strings"
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
