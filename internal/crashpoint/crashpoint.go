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
	Env     = "QUARRY_CRASHPOINTS"
	SeedEnv = "QUARRY_CRASHPOINTS_SEED"
)

var (
	once   sync.Once
	mu     sync.Mutex
	points map[string]float64 // name -> probability
	rnd    *rand.Rand
	exit   = func() { os.Exit(ExitCode) }
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
	if fire {
		fmt.Fprintf(os.Stderr, "crashpoint: crashing at %s\n", name)
		exit()
	}
}
