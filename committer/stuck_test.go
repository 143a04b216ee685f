package committer

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestStuckWatchPurgedStream: a report stream purged to empty keeps its
// last sequence; a term that delivered nothing is then quiet, not stuck.
// A report that is held and not delivered is stuck. Checks run on every
// empty fetch here (every 0), so no clock decides.
func TestStuckWatchPurgedStream(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		delivered uint64 // last report the term delivered, 0: none
		state     jetstream.StreamState
		stuck     bool
	}{
		{"purged to empty, nothing delivered", 0, jetstream.StreamState{Msgs: 0, FirstSeq: 34, LastSeq: 33}, false},
		{"purged to empty, all delivered", 33, jetstream.StreamState{Msgs: 0, FirstSeq: 34, LastSeq: 33}, false},
		{"caught up", 33, jetstream.StreamState{Msgs: 5, FirstSeq: 29, LastSeq: 33}, false},
		{"a held report never delivered", 0, jetstream.StreamState{Msgs: 1, FirstSeq: 33, LastSeq: 33}, true},
		{"a later report never delivered", 32, jetstream.StreamState{Msgs: 2, FirstSeq: 32, LastSeq: 33}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := stuckWatch{}
			if tc.delivered > 0 {
				w.delivered(tc.delivered)
			}
			state := func(context.Context) (jetstream.StreamState, error) { return tc.state, nil }
			var err error
			for range 4 { // the first empty fetch starts the run, the next ones check
				if err = w.idle(ctx, state); err != nil {
					break
				}
			}
			if got := errors.Is(err, errConsumerStuck); got != tc.stuck {
				t.Fatalf("stuck %v (%v), want %v", got, err, tc.stuck)
			}
		})
	}
}
