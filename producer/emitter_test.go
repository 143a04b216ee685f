package producer

import (
	"context"
	"testing"
)

// An emitter flushed after every line (a reader that flushes before each
// blocking read: a pipe, a followed file) reuses the batches the framer
// hands back instead of allocating a full batch per flush.
func TestEmitterReusesBatches(t *testing.T) {
	ctx := context.Background()
	ch, free := make(chan []line, 1), make(chan []line, 8)
	e := &emitter{ch: ch, free: free, buf: make([]line, 0, emitBatch)}
	framer := func() {
		b := <-ch
		clear(b)
		select { // as Lines.loop does
		case free <- b[:0]:
		default:
		}
	}
	// Warm up: the first flush hands over the initial batch.
	if err := e.add(ctx, line{text: "x", stamped: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.flush(ctx); err != nil {
		t.Fatal(err)
	}
	framer()
	allocs := testing.AllocsPerRun(200, func() {
		if err := e.add(ctx, line{text: "x", stamped: true}); err != nil {
			t.Fatal(err)
		}
		if err := e.flush(ctx); err != nil {
			t.Fatal(err)
		}
		framer()
	})
	if allocs > 0 {
		t.Fatalf("%.1f allocations per one-line flush, want 0 (batches reused)", allocs)
	}
}
