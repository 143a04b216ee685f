package committer

import (
	"fmt"
	"slices"
	"time"
)

// bgFailure is a background job of the committer (a table's checkpoints,
// its log cleanup, the maintenance pass) failing attempt after attempt.
// These jobs never hold up the high-water and are retried at their next
// turn (the next checkpoint interval, the next pass), which may be far
// off, so one failure is not a stall: Ready reports a job once it failed
// at least twice in a row and for at least StallAfter.
type bgFailure struct {
	since time.Time // the first failure in a row
	count int
	err   error
}

// bgFailed records a failure of job (its name, e.g. "checkpoint records").
func (c *Committer) bgFailed(job string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bgFail == nil {
		c.bgFail = map[string]*bgFailure{}
	}
	f := c.bgFail[job]
	if f == nil {
		f = &bgFailure{since: time.Now()}
		c.bgFail[job] = f
	}
	f.count++
	f.err = err
}

// bgSucceeded clears job's failures.
func (c *Committer) bgSucceeded(job string) {
	c.mu.Lock()
	delete(c.bgFail, job)
	c.mu.Unlock()
}

// bgStalled is the first (by name) background job stalled as bgFailure
// says, nil when none is; c.mu is held.
func (c *Committer) bgStalled() error {
	jobs := make([]string, 0, len(c.bgFail))
	for j := range c.bgFail {
		jobs = append(jobs, j)
	}
	slices.Sort(jobs)
	for _, j := range jobs {
		f := c.bgFail[j]
		if f.count >= 2 && time.Since(f.since) >= c.cfg.StallAfter {
			return fmt.Errorf("%s failing since %s (%d attempts in a row): %w", j, time.Since(f.since).Truncate(time.Second), f.count, f.err)
		}
	}
	return nil
}
