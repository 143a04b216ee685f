// Package backoff is quarry's one retry policy: exponential waits between a
// floor and a ceiling, a context-aware sleep, and the default timeout every
// network call gets when its caller set none. Every stage retries through
// it, so a policy change (a cap, a limit on attempts) lands everywhere at once.
package backoff

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Policy bounds a sequence of waits. The first wait is Min; each next one is
// Factor times the last, capped at Max. MaxAttempts, when positive, is how
// many times Retry calls its function before giving up with ErrExhausted.
type Policy struct {
	Min         time.Duration
	Max         time.Duration
	Factor      float64 // 2 when zero
	MaxAttempts int     // 0: until the context ends
}

// Default is the policy of loops that name none: 100ms doubling to 5s.
var Default = Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second}

// ErrExhausted wraps the last error of a Retry that ran out of attempts.
var ErrExhausted = errors.New("retries exhausted")

// Validate reports what is wrong with p, naming key as the config key.
func (p Policy) Validate(key string) error {
	var errs []error
	if p.Min <= 0 {
		errs = append(errs, fmt.Errorf("%s: minimum backoff %s must be positive", key, p.Min))
	}
	if p.Max < p.Min {
		errs = append(errs, fmt.Errorf("%s: maximum backoff %s must be at least the minimum %s", key, p.Max, p.Min))
	}
	if p.Factor != 0 && p.Factor < 1 {
		errs = append(errs, fmt.Errorf("%s: factor %v must be at least 1", key, p.Factor))
	}
	if p.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("%s: max attempts %d must not be negative", key, p.MaxAttempts))
	}
	return errors.Join(errs...)
}

// Backoff is the state of one retry loop. The zero value is not usable; call
// New. A Backoff is not safe for concurrent use.
type Backoff struct {
	p        Policy
	next     time.Duration
	attempts int
}

// New starts a loop under p. A zero Min or Max takes Default's.
func New(p Policy) *Backoff {
	if p.Min <= 0 {
		p.Min = Default.Min
	}
	if p.Max < p.Min {
		p.Max = max(Default.Max, p.Min)
	}
	if p.Factor < 1 {
		p.Factor = 2
	}
	return &Backoff{p: p, next: p.Min}
}

// Next returns the wait before the next attempt and advances the sequence.
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.attempts++
	b.next = min(time.Duration(float64(b.next)*b.p.Factor), b.p.Max)
	return d
}

// Peek returns the wait Next would return, without advancing.
func (b *Backoff) Peek() time.Duration { return b.next }

// Attempts is how many waits Next has handed out since the last Reset.
func (b *Backoff) Attempts() int { return b.attempts }

// Reset starts the sequence again at Min, after a success.
func (b *Backoff) Reset() { b.next, b.attempts = b.p.Min, 0 }

// Wait sleeps for Next() or until ctx ends; it returns ctx.Err() in that case.
func (b *Backoff) Wait(ctx context.Context) error {
	if !Sleep(ctx, b.Next()) {
		return ctx.Err()
	}
	return nil
}

// Retry calls fn until it returns nil, an error wrapped by Permanent, or the
// context ends, waiting under p between calls. With p.MaxAttempts set, it
// stops after that many calls and returns the last error wrapped in
// ErrExhausted. onRetry, when non-nil, sees every error that will be retried
// and the wait before the next call (to log or count it).
func Retry(ctx context.Context, p Policy, fn func(ctx context.Context) error, onRetry func(err error, wait time.Duration)) error {
	b := New(p)
	for {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		var perm *permanent
		if errors.As(err, &perm) {
			return perm.err
		}
		if p.MaxAttempts > 0 && b.Attempts()+1 >= p.MaxAttempts {
			return fmt.Errorf("%w after %d attempts: %w", ErrExhausted, p.MaxAttempts, err)
		}
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		wait := b.Peek()
		if onRetry != nil {
			onRetry(err, wait)
		}
		if werr := b.Wait(ctx); werr != nil {
			return errors.Join(werr, err)
		}
	}
}

// Permanent marks err as not worth retrying: Retry returns it unwrapped.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err: err}
}

type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Sleep waits for d or until ctx ends, and reports whether the full wait passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// WithTimeout bounds ctx by d unless the caller already set a deadline: the
// default timeout of every network call whose caller named none.
func WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
