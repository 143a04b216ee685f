package encoder

import (
	"context"
	"errors"
	"testing"
)

// TestReserveEncodeSlot: a reservation takes one of the process's encode
// slots until released (once, however often release is called), a
// reservation waits while every slot is taken, and a process of one slot
// keeps it for its encoders.
func TestReserveEncodeSlot(t *testing.T) {
	if cap(encodeSlots) < 2 {
		t.Skip("GOMAXPROCS 1: nothing is reserved")
	}
	if n := EncodeSlotsInUse(); n != 0 {
		t.Fatalf("slots in use before: %d", n)
	}
	release, err := ReserveEncodeSlot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := EncodeSlotsInUse(); n != 1 {
		t.Fatalf("slots in use with a reservation: %d, want 1", n)
	}
	release()
	release()
	if n := EncodeSlotsInUse(); n != 0 {
		t.Fatalf("slots in use after release (twice): %d, want 0", n)
	}

	for range cap(encodeSlots) {
		encodeSlots <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReserveEncodeSlot(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("reserve with every slot taken and ctx cancelled: %v", err)
	}
	for range cap(encodeSlots) {
		<-encodeSlots
	}

	saved := encodeSlots
	defer func() { encodeSlots = saved }()
	encodeSlots = make(chan struct{}, 1)
	release, err = ReserveEncodeSlot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := EncodeSlotsInUse(); n != 0 {
		t.Fatalf("one slot: %d reserved, want 0", n)
	}
	release()
}
