package crashpoint

import (
	"math/rand"
	"sync"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want map[string]float64
		bad  bool
	}{
		{spec: "", want: map[string]float64{}},
		{spec: "a", want: map[string]float64{"a": 1}},
		{spec: "a, b@0.25", want: map[string]float64{"a": 1, "b": 0.25}},
		{spec: "a@2", bad: true},
		{spec: "a@x", bad: true},
		{spec: "@0.5", bad: true},
	} {
		got, err := Parse(tc.spec)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: no error", tc.spec)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%q: %v, want %v", tc.spec, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%q: %s=%v, want %v", tc.spec, k, got[k], v)
			}
		}
	}
}

func TestHit(t *testing.T) {
	once.Do(func() {}) // do not read the environment
	fired := 0
	oldExit := exit
	exit = func() { fired++ }
	points = map[string]float64{"always": 1, "never": 0}
	rnd = rand.New(rand.NewSource(1))
	t.Cleanup(func() { points, exit, once = nil, oldExit, sync.Once{} })
	Hit("never")
	Hit("other")
	if fired != 0 {
		t.Fatalf("fired %d times for unarmed points", fired)
	}
	Hit("always")
	if fired != 1 {
		t.Fatalf("fired %d times, want 1", fired)
	}
}

func TestHitHangs(t *testing.T) {
	once.Do(func() {}) // do not read the environment
	exited, held := 0, 0
	oldExit, oldHold := exit, hold
	exit, hold = func() { exited++ }, func() { held++ }
	points, hangs = map[string]float64{"always": 1}, true
	rnd = rand.New(rand.NewSource(1))
	t.Cleanup(func() { points, exit, hold, hangs, once = nil, oldExit, oldHold, false, sync.Once{} })
	Hit("other")
	Hit("always")
	if held != 1 || exited != 0 {
		t.Fatalf("held %d, exited %d; want held once", held, exited)
	}
}
