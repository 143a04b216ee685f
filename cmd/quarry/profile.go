package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// Profiles of one command, for finding where the CPU and the allocations
// of a run go (docs/benchmarks.md): QUARRY_CPUPROFILE=FILE writes a CPU
// profile of the whole command, QUARRY_MEMPROFILE=FILE the allocation
// profile (go tool pprof -sample_index=alloc_space) when it ends. In
// `quarry run` every sample carries the label stage=<stage>
// (pipeline.StageLabel): go tool pprof -tags FILE splits the CPU by stage.
const (
	cpuProfileEnv = "QUARRY_CPUPROFILE"
	memProfileEnv = "QUARRY_MEMPROFILE"
)

// startProfiles starts the profiles the environment asks for; stop writes
// them out.
func startProfiles(getenv func(string) string) (stop func() error, err error) {
	var cpu *os.File
	if path := getenv(cpuProfileEnv); path != "" {
		if cpu, err = os.Create(path); err != nil {
			return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			cpu.Close()
			return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
		}
	}
	memPath := getenv(memProfileEnv)
	return func() error {
		var errs []error
		if cpu != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpu.Close())
		}
		if memPath != "" {
			runtime.GC() // the profile is as of the last GC
			f, err := os.Create(memPath)
			if err != nil {
				return errors.Join(append(errs, fmt.Errorf("%s: %w", memProfileEnv, err))...)
			}
			errs = append(errs, pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		}
		return errors.Join(errs...)
	}, nil
}
