// Package floortest holds the test helpers that check a producer source's
// WAL floor (package walfloor) from the outside, through its KV key: shared
// by the line source and CDC tests. Only tests import it.
package floortest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/quarrylake/quarry/streams"
)

// Released reports, when called, whether source holds no WAL floor.
func Released(t testing.TB, js jetstream.JetStream, source string) func() bool {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), streams.PositionsBucket)
	if err != nil {
		t.Fatal(err)
	}
	return func() bool {
		_, err := kv.Get(context.Background(), streams.FloorKey(source))
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}
}

// Watch watches source's WAL floor key for updates from now on, until the
// test ends.
func Watch(t testing.TB, js jetstream.JetStream, source string) jetstream.KeyWatcher {
	t.Helper()
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, streams.PositionsBucket)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, streams.FloorKey(source), jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop() })
	return w
}

// EventsUntilReleased collects the floor key's events from w (Watch of
// source) until done holds and the last event is the key's latest
// revision, a release: an earlier release whose later events the watcher
// has not delivered yet does not end it.
func EventsUntilReleased(t testing.TB, js jetstream.JetStream, source string, w jetstream.KeyWatcher, done func() bool) []jetstream.KeyValueEntry {
	t.Helper()
	ctx := context.Background()
	kvs, err := js.Stream(ctx, "KV_"+streams.PositionsBucket)
	if err != nil {
		t.Fatal(err)
	}
	subj := "$KV." + streams.PositionsBucket + "." + streams.FloorKey(source)
	latest := func(e jetstream.KeyValueEntry) bool {
		m, err := kvs.GetLastMsgForSubject(ctx, subj)
		return err == nil && m.Sequence == e.Revision()
	}
	var events []jetstream.KeyValueEntry
	deadline := time.After(30 * time.Second)
	for {
		if n := len(events); n > 0 && events[n-1].Operation() == jetstream.KeyValueDelete && done() && latest(events[n-1]) {
			return events
		}
		select {
		case e := <-w.Updates():
			if e != nil {
				events = append(events, e)
			}
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%d floor events, done %v: never released again", len(events), done())
		}
	}
}

// CheckCovered checks, against the floor key's events (watched from before
// the frames were published, ending with a release), that every frame on
// subj after the first skip ones was stored while a floor at or below its
// sequence was in place, and that the final release came after the last of
// them.
func CheckCovered(t testing.TB, js jetstream.JetStream, subj string, skip int, events []jetstream.KeyValueEntry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, streams.WALStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Every new frame was stored while a floor at or below its sequence
	// was in place: the last floor event before it is a put.
	newFrames, seen := 0, 0
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil || m.Subject != subj {
			continue
		}
		if seen++; seen <= skip {
			continue // written before the source went idle
		}
		newFrames++
		var last jetstream.KeyValueEntry
		for _, e := range events {
			if !e.Created().After(m.Time) {
				last = e
			}
		}
		if last == nil || last.Operation() != jetstream.KeyValuePut {
			t.Fatalf("frame at seq %d stored at %s with no floor in place (last floor event %v)", seq, m.Time, last)
		}
		if v, err := strconv.ParseUint(string(last.Value()), 10, 64); err != nil || v > seq {
			t.Fatalf("frame at seq %d under floor %q", seq, last.Value())
		}
		if del := events[len(events)-1]; del.Created().Before(m.Time) {
			t.Fatalf("floor finally released at %s, before the frame at seq %d was stored at %s", del.Created(), seq, m.Time)
		}
	}
	if newFrames < 2 || len(events) < 2 {
		t.Fatalf("%d new frames, %d floor events: want several of each", newFrames, len(events))
	}
}
