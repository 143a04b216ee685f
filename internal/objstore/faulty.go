package objstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"
)

// ErrInjected is the error a fault rule returns when it names none.
var ErrInjected = errors.New("injected fault")

// Op names a Store operation for fault rules.
type Op string

// Operations fault rules can match.
const (
	OpAny         Op = ""
	OpPut         Op = "put"
	OpPutIfAbsent Op = "put-if-absent"
	OpGet         Op = "get"
	OpOpen        Op = "open"
	OpStat        Op = "stat"
	OpList        Op = "list"
	OpListAfter   Op = "list-after"
	OpDelete      Op = "delete"
)

// Rule is one fault. A call matches a rule when its operation and key match;
// a matching call fires the rule when the rule's trigger says so:
//
//   - Nth > 0: only the Nth matching call (1-based) fires;
//   - else Prob > 0: each matching call fires with probability Prob, drawn
//     from the Faults' seeded source (deterministic for a seed and call order);
//   - else every matching call fires.
//
// Times > 0 caps how often the rule fires in total.
//
// A fired rule first sleeps Delay (honouring ctx). Then, with LoseReply, it
// performs the operation and returns Err instead of the result ("the write
// happened but the reply was lost"); otherwise it returns Err without
// performing the operation. Err nil means ErrInjected, except that a rule with
// a Delay, no Err and no LoseReply only slows the call down and lets it run.
type Rule struct {
	Op        Op     // OpAny matches every operation
	KeyPrefix string // matches keys (or List prefixes) with this prefix; "" matches all
	Err       error  // returned error; nil means ErrInjected (see above)
	Delay     time.Duration
	LoseReply bool
	Prob      float64
	Nth       int
	Times     int
}

type ruleState struct {
	id    int
	rule  Rule
	seen  int // matching calls
	fired int
}

// Faults is a mutable, concurrency-safe set of fault rules shared by one or
// more faulty stores; tests change it while the system under test runs.
type Faults struct {
	mu     sync.Mutex
	rnd    *rand.Rand
	rules  []*ruleState
	nextID int
	fired  map[Op]int
	calls  map[Op]int
}

// NewFaults returns an empty rule set whose probabilistic rules draw from a
// source seeded with seed.
func NewFaults(seed int64) *Faults {
	return &Faults{rnd: rand.New(rand.NewSource(seed)), fired: map[Op]int{}, calls: map[Op]int{}}
}

// Add installs r and returns its id for Remove.
func (f *Faults) Add(r Rule) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	f.rules = append(f.rules, &ruleState{id: f.nextID, rule: r})
	return f.nextID
}

// Remove uninstalls the rule with id.
func (f *Faults) Remove(id int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, rs := range f.rules {
		if rs.id == id {
			f.rules = append(f.rules[:i], f.rules[i+1:]...)
			return
		}
	}
}

// Clear removes every rule.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// Fired is how many calls of op fired a rule (OpAny: of every operation).
func (f *Faults) Fired(op Op) int { return f.count(f.fired, op) }

// Calls is how many calls of op the faulty stores saw (OpAny: all).
func (f *Faults) Calls(op Op) int { return f.count(f.calls, op) }

func (f *Faults) count(m map[Op]int, op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if op != OpAny {
		return m[op]
	}
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// action is what a call must do: the combined effect of the rules it fired.
type action struct {
	delay     time.Duration
	err       error
	loseReply bool
	fired     bool
}

func (f *Faults) decide(op Op, key string) action {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	var a action
	for _, rs := range f.rules {
		r := rs.rule
		if r.Op != OpAny && r.Op != op {
			continue
		}
		if r.KeyPrefix != "" && !strings.HasPrefix(key, r.KeyPrefix) {
			continue
		}
		rs.seen++
		if r.Times > 0 && rs.fired >= r.Times {
			continue
		}
		var fire bool
		switch {
		case r.Nth > 0:
			fire = rs.seen == r.Nth
		case r.Prob > 0:
			fire = f.rnd.Float64() < r.Prob
		default:
			fire = true
		}
		if !fire {
			continue
		}
		rs.fired++
		a.fired = true
		a.delay += r.Delay
		if a.err == nil && (r.Err != nil || r.LoseReply || r.Delay == 0) {
			a.loseReply = r.LoseReply
			a.err = r.Err
			if a.err == nil {
				a.err = ErrInjected
			}
		}
	}
	if a.fired {
		f.fired[op]++
	}
	return a
}

// faulty wraps a Store with Faults.
type faulty struct {
	inner Store
	f     *Faults
}

// NewFaulty wraps inner so that every call consults f first.
func NewFaulty(inner Store, f *Faults) Store { return &faulty{inner: inner, f: f} }

func (s *faulty) String() string { return "faulty(" + s.inner.String() + ")" }

// before applies the delay and reports whether to run the call and the error
// to return instead of (or, with loseReply, after) it.
func (s *faulty) before(ctx context.Context, op Op, key string) (run bool, err error) {
	a := s.f.decide(op, key)
	if a.delay > 0 {
		t := time.NewTimer(a.delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("%s %s: %w", op, key, ctx.Err())
		case <-t.C:
		}
	}
	if a.err == nil {
		return true, nil
	}
	return a.loseReply, fmt.Errorf("%s %s: %w", op, key, a.err)
}

func (s *faulty) Put(ctx context.Context, key string, data []byte) error {
	run, ferr := s.before(ctx, OpPut, key)
	if !run {
		return ferr
	}
	if err := s.inner.Put(ctx, key, data); err != nil || ferr != nil {
		return errors.Join(err, ferr)
	}
	return nil
}

func (s *faulty) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	run, ferr := s.before(ctx, OpPutIfAbsent, key)
	if !run {
		return ferr
	}
	if err := s.inner.PutIfAbsent(ctx, key, data); err != nil || ferr != nil {
		return errors.Join(err, ferr)
	}
	return nil
}

func (s *faulty) Get(ctx context.Context, key string) ([]byte, error) {
	run, ferr := s.before(ctx, OpGet, key)
	if !run {
		return nil, ferr
	}
	b, err := s.inner.Get(ctx, key)
	if err != nil || ferr != nil {
		return nil, errors.Join(err, ferr)
	}
	return b, nil
}

func (s *faulty) Open(ctx context.Context, key string) (ReaderAtCloser, int64, error) {
	run, ferr := s.before(ctx, OpOpen, key)
	if !run {
		return nil, 0, ferr
	}
	r, n, err := s.inner.Open(ctx, key)
	if err != nil {
		return nil, 0, errors.Join(err, ferr)
	}
	if ferr != nil {
		r.Close()
		return nil, 0, ferr
	}
	return r, n, nil
}

func (s *faulty) Stat(ctx context.Context, key string) (Info, error) {
	run, ferr := s.before(ctx, OpStat, key)
	if !run {
		return Info{}, ferr
	}
	i, err := s.inner.Stat(ctx, key)
	if err != nil || ferr != nil {
		return Info{}, errors.Join(err, ferr)
	}
	return i, nil
}

func (s *faulty) List(ctx context.Context, prefix string) ([]Info, error) {
	run, ferr := s.before(ctx, OpList, prefix)
	if !run {
		return nil, ferr
	}
	l, err := s.inner.List(ctx, prefix)
	if err != nil || ferr != nil {
		return nil, errors.Join(err, ferr)
	}
	return l, nil
}

func (s *faulty) ListAfter(ctx context.Context, prefix, startAfter string, limit int) ([]Info, error) {
	run, ferr := s.before(ctx, OpListAfter, prefix)
	if !run {
		return nil, ferr
	}
	l, err := ListAfter(ctx, s.inner, prefix, startAfter, limit)
	if err != nil || ferr != nil {
		return nil, errors.Join(err, ferr)
	}
	return l, nil
}

func (s *faulty) Delete(ctx context.Context, key string) error {
	run, ferr := s.before(ctx, OpDelete, key)
	if !run {
		return ferr
	}
	if err := s.inner.Delete(ctx, key); err != nil || ferr != nil {
		return errors.Join(err, ferr)
	}
	return nil
}
