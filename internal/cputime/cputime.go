// Package cputime reads the CPU time (user + system) the process has used,
// the measure of benchmarks and `quarry run` summaries that stays meaningful
// on a machine shared with other work.
package cputime

import "time"

// Used is the CPU time (user + system, every thread) this process has used
// so far; ok is false where the platform cannot say.
func Used() (d time.Duration, ok bool) { return used() }
