package walfloor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fakeKV records the floor operations in order and fails them on demand.
type fakeKV struct {
	jetstream.KeyValue
	ops  []string
	val  map[string]string
	fail error
}

func (k *fakeKV) Put(_ context.Context, key string, v []byte) (uint64, error) {
	if k.fail != nil {
		return 0, k.fail
	}
	k.ops = append(k.ops, "put "+string(v))
	k.val[key] = string(v)
	return 1, nil
}

func (k *fakeKV) Delete(_ context.Context, key string, _ ...jetstream.KVDeleteOpt) error {
	if k.fail != nil {
		return k.fail
	}
	k.ops = append(k.ops, "delete")
	delete(k.val, key)
	return nil
}

type entry struct {
	jetstream.KeyValueEntry
	v string
}

func (e entry) Value() []byte      { return []byte(e.v) }
func (e entry) Created() time.Time { return time.Unix(1, 0) }

func (k *fakeKV) Get(_ context.Context, key string) (jetstream.KeyValueEntry, error) {
	v, ok := k.val[key]
	if !ok {
		return nil, jetstream.ErrKeyNotFound
	}
	return entry{v: v}, nil
}

// TestFloorRules walks the protocol step by step and checks the key
// operations each step makes and the floor's state after it.
func TestFloorRules(t *testing.T) {
	ctx := context.Background()
	kv := &fakeKV{val: map[string]string{}}
	f := New(kv, "producer.src")
	if f.Key() != "floor.producer.src" {
		t.Fatalf("key %q", f.Key())
	}
	idle, busy := func() bool { return true }, func() bool { return false }
	steps := []struct {
		name   string
		do     func() error
		ops    string // key operations the step makes
		held   bool
		lowest uint64 // Lowest(0) after the step
	}{
		{"start puts the floor before any frame", func() error { return f.Start(ctx, 6) }, "put 6", true, 0},
		{"hold while held records the bound only", func() error { return f.Hold(ctx, 6) }, "", true, 6},
		{"hold a second frame", func() error { return f.Hold(ctx, 9) }, "", true, 6},
		{"sync with frames held never releases, nor puts above the oldest bound",
			func() error { return f.Sync(ctx, 20, idle) }, "put 6", true, 6},
		{"done forgets the oldest bound", func() error { f.Done(); return nil }, "", true, 9},
		{"sync not idle puts the value", func() error { f.Done(); return f.Sync(ctx, 12, busy) }, "put 12", true, 0},
		{"sync idle with nothing held releases", func() error { return f.Sync(ctx, 12, idle) }, "delete", false, 0},
		{"sync idle again does nothing", func() error { return f.Sync(ctx, 13, idle) }, "", false, 0},
		{"hold after a release puts the floor back at the bound first",
			func() error { return f.Hold(ctx, 14) }, "put 14", true, 14},
		{"drop forgets the newest bound", func() error {
			if err := f.Hold(ctx, 15); err != nil {
				return err
			}
			f.Drop()
			return nil
		}, "", true, 14},
		{"the last done and an idle sync release again", func() error { f.Done(); return f.Sync(ctx, 16, idle) }, "delete", false, 0},
	}
	for _, s := range steps {
		kv.ops = nil
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := strings.Join(kv.ops, ", "); got != s.ops {
			t.Fatalf("%s: key operations %q, want %q", s.name, got, s.ops)
		}
		if f.Held() != s.held || f.Lowest(0) != s.lowest {
			t.Fatalf("%s: held %v lowest %d, want %v %d", s.name, f.Held(), f.Lowest(0), s.held, s.lowest)
		}
	}
}

// A Hold whose put fails records nothing and leaves the floor released, so
// the frame is not published and the next Hold tries the put again; a
// failed release keeps the floor held.
func TestFloorFailures(t *testing.T) {
	ctx := context.Background()
	kv := &fakeKV{val: map[string]string{}}
	f := New(kv, "s")
	boom := errors.New("kv down")
	kv.fail = boom
	if err := f.Hold(ctx, 3); !errors.Is(err, boom) || !strings.Contains(err.Error(), "floor.s") {
		t.Fatalf("hold with a failing kv: %v", err)
	}
	if f.Held() || f.Lowest(0) != 0 {
		t.Fatalf("failed hold left held %v lowest %d", f.Held(), f.Lowest(0))
	}
	kv.fail = nil
	if err := f.Hold(ctx, 3); err != nil || kv.val["floor.s"] != "3" {
		t.Fatalf("hold after the kv came back: %v, floor %q", err, kv.val["floor.s"])
	}
	f.Done()
	kv.fail = boom
	if err := f.Sync(ctx, 4, func() bool { return true }); !errors.Is(err, boom) || !f.Held() {
		t.Fatalf("failed release: %v, held %v", err, f.Held())
	}
}

func TestFloorCheck(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		floor    string // "" for none
		walFirst uint64
		lost     bool
	}{
		{"", 100, false},
		{"not a number", 100, false},
		{"100", 100, false},
		{"150", 100, false},
		{"99", 100, true},
	} {
		t.Run(fmt.Sprintf("floor %q first %d", tc.floor, tc.walFirst), func(t *testing.T) {
			kv := &fakeKV{val: map[string]string{}}
			if tc.floor != "" {
				kv.val["floor.s"] = tc.floor
			}
			l, lost := New(kv, "s").Check(ctx, tc.walFirst)
			if lost != tc.lost || (lost && (l.Floor != 99 || l.SavedAt.IsZero())) {
				t.Fatalf("Check = %+v %v, want lost %v", l, lost, tc.lost)
			}
		})
	}
}
