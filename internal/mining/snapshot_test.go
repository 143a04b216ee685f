package mining

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"testing"
)

// rewriteVersion decodes a snapshot, sets its version and encodes it again:
// the snapshot an engine of that version would have written (the gob
// encoding did not change between versions 1 and 2).
func rewriteVersion(t *testing.T, snap []byte, version int) []byte {
	t.Helper()
	var st snapState
	if err := gob.NewDecoder(bytes.NewReader(snap)).Decode(&st); err != nil {
		t.Fatal(err)
	}
	st.Version = version
	var out bytes.Buffer
	if err := gob.NewEncoder(&out).Encode(&st); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestRestoreOlderEngine: a snapshot of an older engine (whose templates
// were made by other tokenization rules) restores its counters, tenants
// and id counter but not its templates, which are re-learnt from later
// lines under new ids; a snapshot of a newer engine is an error.
func TestRestoreOlderEngine(t *testing.T) {
	cfg := Config{MaxTemplatesPerTenant: 40}
	a := mustNew(t, cfg)
	lines := genCorpus(1000, 3)
	for i, l := range lines {
		a.Mine(fmt.Sprint("t", i%2), l, nil)
	}
	var buf bytes.Buffer
	if err := a.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	before := a.Stats()
	if before.Templates == 0 {
		t.Fatal("no templates to drop")
	}

	for _, tc := range []struct {
		name    string
		version int
		err     bool
		relearn bool
	}{
		{"current engine", snapshotVersion, false, false},
		{"version 1: before header detection and lists", 1, false, true},
		{"version 2: before the host/IPv4 split", 2, false, true},
		{"newer engine", snapshotVersion + 1, true, false},
		{"version 0", 0, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Restore(cfg, bytes.NewReader(rewriteVersion(t, buf.Bytes(), tc.version)))
			if tc.err {
				if !errors.Is(err, ErrSnapshotVersion) {
					t.Fatalf("Restore of version %d: err %v, want ErrSnapshotVersion", tc.version, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st := b.Stats()
			if !tc.relearn {
				if fmt.Sprint(st) != fmt.Sprint(before) {
					t.Fatalf("stats %+v, want %+v", st, before)
				}
				return
			}
			if st.Templates != 0 || st.Dropped != uint64(before.Templates) {
				t.Fatalf("older engine: %d templates restored, %d dropped; want 0 and %d", st.Templates, st.Dropped, before.Templates)
			}
			if st.Lines != before.Lines || st.Created != before.Created || st.Evictions != before.Evictions || len(st.Tenants) != len(before.Tenants) {
				t.Fatalf("counters not restored: %+v, want those of %+v", st, before)
			}
			// Re-learnt templates get ids above every id of the old run.
			r, ev := b.Mine("t0", lines[0], nil)
			if r.ID < a.nextID || len(ev) != 1 || ev[0].Kind != EventCreated {
				t.Fatalf("first line after the upgrade: id %d (old ids end below %d), events %v", r.ID, a.nextID, ev)
			}
			// The re-learnt model snapshots as the current version and
			// keeps its Dropped count.
			var again bytes.Buffer
			if err := b.Snapshot(&again); err != nil {
				t.Fatal(err)
			}
			c, err := Restore(cfg, &again)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(c.Stats()) != fmt.Sprint(b.Stats()) {
				t.Fatalf("after the upgrade: stats %+v, want %+v", c.Stats(), b.Stats())
			}
		})
	}
}
