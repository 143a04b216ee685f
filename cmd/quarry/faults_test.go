package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/objstore"
)

func TestParseFaults(t *testing.T) {
	_, rules, err := parseFaults("seed=7, put.err=0.05,put.lose=0.02,get.delay=200ms@0.1,any.timeout=2s,stat.err=0")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 4 { // stat.err=0 adds nothing
		t.Fatalf("%d rules: %+v", len(rules), rules)
	}
	want := []objstore.Rule{
		{Op: objstore.OpPut, Prob: 0.05},
		{Op: objstore.OpPut, Prob: 0.02, LoseReply: true},
		{Op: objstore.OpGet, Prob: 0.1, Delay: 200 * time.Millisecond},
		{Op: objstore.OpAny, Prob: 1, Delay: 2 * time.Second},
	}
	for i, w := range want {
		r := rules[i]
		if r.Op != w.Op || r.Prob != w.Prob || r.LoseReply != w.LoseReply || r.Delay != w.Delay {
			t.Errorf("rule %d = %+v, want %+v", i, r, w)
		}
	}
	if rules[3].Err == nil || !strings.Contains(rules[3].Err.Error(), "timeout") {
		t.Errorf("timeout rule error %v", rules[3].Err)
	}
	for _, bad := range []string{"put", "put.err=2", "put.err=x", "nope.err=0.1", "put.boom=0.1", "seed=x", "get.delay=soon", "put.delay=1s@7"} {
		if _, _, err := parseFaults(bad); err == nil || !strings.Contains(err.Error(), faultsEnv) {
			t.Errorf("parseFaults(%q) = %v, want an error naming %s", bad, err, faultsEnv)
		}
	}
}

// TestFaultsWrapTheStore: a role's store really fails as the spec says.
func TestFaultsWrapTheStore(t *testing.T) {
	local, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := parseFaults("put.err=1")
	if err != nil {
		t.Fatal(err)
	}
	s := objstore.NewFaulty(local, f)
	if err := s.Put(context.Background(), "a", []byte("x")); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("put under put.err=1: %v", err)
	}
	if _, err := local.Get(context.Background(), "a"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("an err fault must not perform the write: %v", err)
	}
}
