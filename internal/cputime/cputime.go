// Package cputime reads the CPU time (user + system) the process has used,
// the measure of benchmarks and `quarry run` summaries that stays meaningful
// on a machine shared with other work.
package cputime

import "time"

// Used is the CPU time (user + system, every thread) this process has used
// so far; ok is false where the platform cannot say.
func Used() (d time.Duration, ok bool) { return used() }

// Waited is the time this process's threads have spent ready to run but
// waiting for a CPU that other work held (Linux: the threads' schedstat
// run delay); ok is false where the platform cannot say. Set against Used
// over the same period, it tells a process that has little to do from one
// that gets little CPU on a busy machine.
func Waited() (d time.Duration, ok bool) { return waited() }
