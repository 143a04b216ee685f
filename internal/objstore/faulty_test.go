package objstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/objstore"
)

func newFaulty(t *testing.T, seed int64) (objstore.Store, objstore.Store, *objstore.Faults) {
	t.Helper()
	inner, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := objstore.NewFaults(seed)
	return objstore.NewFaulty(inner, f), inner, f
}

func TestFaultyError(t *testing.T) {
	ctx := context.Background()
	s, inner, f := newFaulty(t, 1)
	boom := errors.New("boom")
	id := f.Add(objstore.Rule{Op: objstore.OpPut, KeyPrefix: "data/", Err: boom})
	if err := s.Put(ctx, "data/x", []byte("x")); !errors.Is(err, boom) {
		t.Fatalf("put: %v, want boom", err)
	}
	if _, err := inner.Get(ctx, "data/x"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("a failed put wrote the object: %v", err)
	}
	if err := s.Put(ctx, "other/x", []byte("x")); err != nil {
		t.Fatalf("put outside the prefix: %v", err)
	}
	if _, err := s.Get(ctx, "data/x"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("get is not matched by a put rule: %v", err)
	}
	f.Remove(id)
	if err := s.Put(ctx, "data/x", []byte("x")); err != nil {
		t.Fatalf("put after remove: %v", err)
	}
	if f.Fired(objstore.OpPut) != 1 || f.Calls(objstore.OpPut) != 3 || f.Calls(objstore.OpAny) != 4 {
		t.Fatalf("fired %d, calls put %d, all %d", f.Fired(objstore.OpPut), f.Calls(objstore.OpPut), f.Calls(objstore.OpAny))
	}
}

func TestFaultyLoseReply(t *testing.T) {
	ctx := context.Background()
	s, inner, f := newFaulty(t, 1)
	f.Add(objstore.Rule{Op: objstore.OpPutIfAbsent, LoseReply: true, Times: 1})
	err := s.PutIfAbsent(ctx, "log/0", []byte("v0"))
	if !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("put-if-absent: %v, want ErrInjected", err)
	}
	if got, err := inner.Get(ctx, "log/0"); err != nil || string(got) != "v0" {
		t.Fatalf("the write did not happen: %q, %v", got, err)
	}
	// The retry sees its own write as present.
	if err := s.PutIfAbsent(ctx, "log/0", []byte("v0")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("retry: %v, want ErrExists", err)
	}
}

func TestFaultyNth(t *testing.T) {
	ctx := context.Background()
	s, _, f := newFaulty(t, 1)
	f.Add(objstore.Rule{Op: objstore.OpGet, Nth: 3})
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		_, err := s.Get(ctx, "k")
		if (i == 3) != errors.Is(err, objstore.ErrInjected) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

func TestFaultyProbabilityIsSeeded(t *testing.T) {
	ctx := context.Background()
	pattern := func(seed int64) []bool {
		s, _, f := newFaulty(t, seed)
		f.Add(objstore.Rule{Op: objstore.OpStat, Prob: 0.3})
		var out []bool
		for range 200 {
			_, err := s.Stat(ctx, "missing")
			out = append(out, errors.Is(err, objstore.ErrInjected))
		}
		return out
	}
	a, b := pattern(42), pattern(42)
	n := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 42 gave different patterns at call %d", i)
		}
		if a[i] {
			n++
		}
	}
	if n < 30 || n > 90 {
		t.Fatalf("%d of 200 calls failed with p=0.3", n)
	}
}

func TestFaultyDelay(t *testing.T) {
	s, _, f := newFaulty(t, 1)
	f.Add(objstore.Rule{Op: objstore.OpList, Delay: 50 * time.Millisecond})
	start := time.Now()
	if _, err := s.List(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("list took %v, want >= 50ms", d)
	}
	f.Clear()
	f.Add(objstore.Rule{Op: objstore.OpList, Delay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.List(ctx, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("delayed list with a deadline: %v", err)
	}
}

func TestFaultyTimesAndConcurrentChanges(t *testing.T) {
	ctx := context.Background()
	s, _, f := newFaulty(t, 7)
	f.Add(objstore.Rule{Op: objstore.OpAny, Times: 2})
	fails := 0
	for range 5 {
		if err := s.Put(ctx, "k", nil); err != nil {
			fails++
		}
	}
	if fails != 2 {
		t.Fatalf("%d failures, want 2 (Times)", fails)
	}
	// Rules change while calls run (race detector checks the locking).
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			id := f.Add(objstore.Rule{Op: objstore.OpGet, Prob: 0.5})
			f.Remove(id)
		}
	}()
	for range 100 {
		_, _ = s.Get(ctx, "k")
	}
	<-done
}
