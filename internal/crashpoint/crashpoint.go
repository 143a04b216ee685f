// Package crashpoint makes a process die at named points, to test what a
// crash in a window leaves behind. It is off unless the environment
// variable QUARRY_CRASHPOINTS names points:
//
//	QUARRY_CRASHPOINTS="committer.after-records,encoder.after-upload@0.1"
//
// A bare name crashes the first time the point is hit; name@p crashes each
// hit with probability p. QUARRY_CRASHPOINTS_SEED seeds the draws (default:
// the time). Hit exits the process at once with status ExitCode, without
// deferred functions, flushes or lease releases: as close to SIGKILL as a
// process can do to itself, but at a chosen moment.
//
// With QUARRY_CRASHPOINTS_ACTION=hang a firing point instead writes
// "crashpoint: holding at <name>" to stderr and blocks the goroutine that
// hit it for ever, so that a harness that sees the line can SIGKILL the
// process exactly there (the rest of the process, its lease renewal
// included, runs on until the kill).
package crashpoint

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ExitCode is the status a crash point exits with.
const ExitCode = 86

// Env and SeedEnv are the environment variables read once, at the first Hit.
const (
	Env       = "QUARRY_CRASHPOINTS"
	SeedEnv   = "QUARRY_CRASHPOINTS_SEED"
	ActionEnv = "QUARRY_CRASHPOINTS_ACTION"
)

// HoldingLine starts the line a point writes to stderr when it hangs
// (ActionEnv=hang) rather than exits; the point's name follows it.
const HoldingLine = "crashpoint: holding at "

var (
	once   sync.Once
	mu     sync.Mutex
	points map[string]float64 // name -> probability
	rnd    *rand.Rand
	exit   = func() { os.Exit(ExitCode) }
	hold   = func() { select {} }
	hangs  bool // ActionEnv is "hang"
)

// Parse reads a spec ("a,b@0.5") into point probabilities.
func Parse(spec string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, ps, hasP := strings.Cut(part, "@")
		p := 1.0
		if hasP {
			v, err := strconv.ParseFloat(ps, 64)
			if err != nil || v < 0 || v > 1 {
				return nil, fmt.Errorf("crash point %q: probability %q must be 0 to 1", name, ps)
			}
			p = v
		}
		if name == "" {
			return nil, fmt.Errorf("crash point spec %q: empty name", part)
		}
		out[name] = p
	}
	return out, nil
}

func load() {
	spec := os.Getenv(Env)
	if spec == "" {
		return
	}
	pts, err := Parse(spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "crashpoint: %v (crash points off)\n", err)
		return
	}
	seed := time.Now().UnixNano()
	if s, err := strconv.ParseInt(os.Getenv(SeedEnv), 10, 64); err == nil {
		seed = s
	}
	switch a := os.Getenv(ActionEnv); a {
	case "", "exit":
	case "hang":
		hangs = true
	default:
		fmt.Fprintf(os.Stderr, "crashpoint: %s=%q: want exit or hang (crash points off)\n", ActionEnv, a)
		return
	}
	points, rnd = pts, rand.New(rand.NewSource(seed))
}

// Hit exits the process with ExitCode when name is armed (see the package
// doc); otherwise it returns at once.
func Hit(name string) {
	once.Do(load)
	if points == nil {
		return
	}
	mu.Lock()
	p, ok := points[name]
	fire := ok && (p >= 1 || rnd.Float64() < p)
	mu.Unlock()
	if fire && hangs {
		fmt.Fprintf(os.Stderr, "%s%s\n", HoldingLine, name)
		hold()
	} else if fire {
		fmt.Fprintf(os.Stderr, "crashpoint: crashing at %s\n", name)
		exit()
	}
}
