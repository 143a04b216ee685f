package main

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/quarrylake/quarry/internal/objstore"
)

// faultsEnv names the environment variable that, when set, wraps the lake's
// object store in objstore.NewFaulty: a test-only switch for the chaos
// harness (e2e/chaos). The spec is comma-separated key=value pairs:
//
//	seed=7                   seed of the probabilistic draws (default 1)
//	<op>.err=P               the call fails with probability P, not performed
//	<op>.lose=P              the call is performed, its reply lost (error)
//	<op>.delay=D@P           the call is slowed by D with probability P
//	<op>.timeout=D@P         the call hangs for D, then fails (not performed)
//
// where <op> is put, put-if-absent, get, open, stat, list, delete or any.
const faultsEnv = "QUARRY_FAULTS"

// parseFaults turns a QUARRY_FAULTS spec into fault rules.
func parseFaults(spec string) (*objstore.Faults, []objstore.Rule, error) {
	seed := int64(1)
	var rules []objstore.Rule
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, nil, fmt.Errorf("%s: %q is not key=value", faultsEnv, part)
		}
		if k == "seed" {
			s, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: seed %q: %w", faultsEnv, v, err)
			}
			seed = s
			continue
		}
		opName, kind, ok := strings.Cut(k, ".")
		if !ok {
			return nil, nil, fmt.Errorf("%s: %q: want <op>.<kind>", faultsEnv, k)
		}
		op := objstore.Op(opName)
		switch op {
		case "any":
			op = objstore.OpAny
		case objstore.OpPut, objstore.OpPutIfAbsent, objstore.OpGet, objstore.OpOpen, objstore.OpStat, objstore.OpList, objstore.OpDelete:
		default:
			return nil, nil, fmt.Errorf("%s: unknown operation %q", faultsEnv, opName)
		}
		prob := func(s string) (float64, error) {
			p, err := strconv.ParseFloat(s, 64)
			if err != nil || p < 0 || p > 1 {
				return 0, fmt.Errorf("%s: %s: probability %q must be 0 to 1", faultsEnv, k, s)
			}
			return p, nil
		}
		r := objstore.Rule{Op: op}
		switch kind {
		case "err", "lose":
			p, err := prob(v)
			if err != nil {
				return nil, nil, err
			}
			r.Prob, r.LoseReply = p, kind == "lose"
		case "delay", "timeout":
			ds, ps, _ := strings.Cut(v, "@")
			d, err := time.ParseDuration(ds)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %s: duration %q: %w", faultsEnv, k, ds, err)
			}
			p := 1.0
			if ps != "" {
				if p, err = prob(ps); err != nil {
					return nil, nil, err
				}
			}
			r.Delay, r.Prob = d, p
			if kind == "timeout" {
				r.Err = fmt.Errorf("injected timeout after %s", d)
			}
		default:
			return nil, nil, fmt.Errorf("%s: unknown fault kind %q (want err, lose, delay or timeout)", faultsEnv, kind)
		}
		if r.Prob == 0 {
			continue
		}
		rules = append(rules, r)
	}
	f := objstore.NewFaults(seed)
	for _, r := range rules {
		f.Add(r)
	}
	return f, rules, nil
}

// withFaults wraps store when e sets QUARRY_FAULTS; otherwise it returns
// store unchanged.
func withFaults(e *env, store objstore.Store, log *slog.Logger) (objstore.Store, error) {
	spec := e.getenv(faultsEnv)
	if spec == "" {
		return store, nil
	}
	f, rules, err := parseFaults(spec)
	if err != nil {
		return nil, err
	}
	if log != nil {
		log.Warn("object store faults injected", "spec", spec, "rules", len(rules))
	}
	return objstore.NewFaulty(store, f), nil
}
