package backoff

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNextDoublesToMax(t *testing.T) {
	b := New(Policy{Min: 10 * time.Millisecond, Max: 70 * time.Millisecond})
	want := []time.Duration{10, 20, 40, 70, 70}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("wait %d = %s, want %s", i, got, w*time.Millisecond)
		}
	}
	if b.Attempts() != len(want) {
		t.Fatalf("attempts = %d", b.Attempts())
	}
	b.Reset()
	if got := b.Next(); got != 10*time.Millisecond {
		t.Fatalf("after reset = %s", got)
	}
}

func TestNewFillsZeroPolicy(t *testing.T) {
	b := New(Policy{})
	if got := b.Next(); got != Default.Min {
		t.Fatalf("first wait %s, want %s", got, Default.Min)
	}
	for range 20 {
		b.Next()
	}
	if got := b.Next(); got != Default.Max {
		t.Fatalf("capped wait %s, want %s", got, Default.Max)
	}
}

func TestRetry(t *testing.T) {
	boom := errors.New("boom")
	p := Policy{Min: time.Microsecond, Max: time.Microsecond}
	tests := []struct {
		name      string
		p         Policy
		failures  int
		permanent bool
		wantCalls int
		wantErr   error
	}{
		{name: "first try", p: p, wantCalls: 1},
		{name: "after failures", p: p, failures: 3, wantCalls: 4},
		{name: "permanent", p: p, failures: 5, permanent: true, wantCalls: 1, wantErr: boom},
		{name: "exhausted", p: Policy{Min: time.Microsecond, Max: time.Microsecond, MaxAttempts: 3}, failures: 10, wantCalls: 3, wantErr: ErrExhausted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls, retries := 0, 0
			err := Retry(context.Background(), tc.p, func(context.Context) error {
				calls++
				if calls <= tc.failures {
					if tc.permanent {
						return Permanent(boom)
					}
					return boom
				}
				return nil
			}, func(error, time.Duration) { retries++ })
			if calls != tc.wantCalls {
				t.Fatalf("calls = %d, want %d", calls, tc.wantCalls)
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == ErrExhausted && !errors.Is(err, boom) {
				t.Fatalf("exhausted error %v does not carry the last error", err)
			}
			if tc.wantErr == nil && retries != tc.failures {
				t.Fatalf("onRetry saw %d, want %d", retries, tc.failures)
			}
		})
	}
}

func TestRetryStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	boom := errors.New("boom")
	calls := 0
	err := Retry(ctx, Policy{Min: time.Hour, Max: time.Hour}, func(context.Context) error {
		calls++
		return boom
	}, func(error, time.Duration) { cancel() })
	if !errors.Is(err, context.Canceled) || !errors.Is(err, boom) {
		t.Fatalf("err = %v, want canceled and the last error", err)
	}
	if calls != 1 {
		t.Fatalf("calls = %d", calls)
	}
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("sleep on a done context reported a full wait")
	}
	if !Sleep(context.Background(), time.Microsecond) {
		t.Fatal("short sleep reported an interruption")
	}
}

func TestWithTimeoutKeepsCallerDeadline(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	ctx, c2 := WithTimeout(parent, time.Millisecond)
	defer c2()
	d1, _ := parent.Deadline()
	d2, _ := ctx.Deadline()
	if !d1.Equal(d2) {
		t.Fatalf("deadline changed: %s vs %s", d1, d2)
	}
	ctx3, c3 := WithTimeout(context.Background(), time.Minute)
	defer c3()
	if _, ok := ctx3.Deadline(); !ok {
		t.Fatal("no default deadline set")
	}
}

func TestValidate(t *testing.T) {
	if err := (Policy{Min: time.Second, Max: time.Minute}).Validate("x"); err != nil {
		t.Fatal(err)
	}
	err := (Policy{Min: 0, Max: -1, Factor: 0.5, MaxAttempts: -1}).Validate("miner.retry")
	if err == nil {
		t.Fatal("bad policy accepted")
	}
	for _, want := range []string{"miner.retry", "minimum", "maximum", "factor", "attempts"} {
		if !contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
