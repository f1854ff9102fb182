package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// replaceBatch is how many of a key's jobs Replace reads at a time.
const replaceBatch = 500

// Replaced is what the replace of one new job did to its key's jobs.
type Replaced struct {
	// Cancelled are the queued (ready or blocked) jobs it cancelled.
	Cancelled []Cancellation
	// Stopping are the running jobs whose cancel it requested
	// (NewJob.CancelRunning): each ends as its run returns.
	Stopping []Cancellation
	// Into is the job a debounced job joined (NewJob.Debounce): its key's
	// job of its kind still waiting to come due, moved to come due at the
	// new job's time; the new job is not stored. 0: none was waiting.
	Into int64
}

// Replace makes room for the jobs of jobs that replace (NewJob.Replace):
// for each of their keys, in key order, it creates the key's semaphore
// if it has none and locks it, then cancels the key's queued jobs, the
// blocked first (they leave the line), then the ready ones (each
// releases its slot, with no blocked job left to take it), and with
// NewJob.CancelRunning requests the cancel of its running ones (their
// runs' contexts are cancelled; each keeps its slot until it ends). It
// returns what it did by the index of the job that replaced. The caller
// then admits jobs in the same transaction, so each replacing job takes
// the place of those it replaced: producers replacing on one key take
// turns on its lock, and each finds only the job the one before it left.
// A job claimed meanwhile (its ready row gone before the cancel took it)
// is running, not queued: it is left alone, or asked to stop.
func Replace(ctx context.Context, ex driver.Executor, jobs []*driver.NewJob, now time.Time) (map[int]Replaced, driver.Promotion, error) {
	var promoted driver.Promotion
	var order []int
	for i, j := range jobs {
		if j.Replace && j.Limit.Key != "" {
			order = append(order, i)
		}
	}
	if len(order) == 0 {
		return nil, promoted, nil
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(jobs[a].Limit.Key, jobs[b].Limit.Key) })
	out := map[int]Replaced{}
	for _, i := range order {
		j := jobs[i]
		if err := ex.SemaphoreEnsure(ctx, j.Limit, now); err != nil {
			return nil, promoted, err
		}
		if _, _, err := ex.SemaphoreLock(ctx, j.Limit.Key, j.Queue); err != nil {
			return nil, promoted, err
		}
		var r Replaced
		var p driver.Promotion
		var err error
		if j.Debounce {
			r.Into, err = debounceJoin(ctx, ex, j, now)
		} else {
			r, p, err = replaceKey(ctx, ex, j.Limit.Key, j.CancelRunning, now)
		}
		if err != nil {
			return nil, promoted, fmt.Errorf("replace the jobs of key %q: %w", j.Limit.Key, err)
		}
		promoted.Add(p)
		if len(r.Cancelled)+len(r.Stopping) > 0 || r.Into != 0 {
			out[i] = r
		}
	}
	return out, promoted, nil
}

// replaceKey cancels key's blocked jobs, then its ready ones, and with
// running its running ones, with the key locked.
func replaceKey(ctx context.Context, ex driver.Executor, key string, running bool, now time.Time) (Replaced, driver.Promotion, error) {
	var r Replaced
	var promoted driver.Promotion
	cancel := func(id int64) error {
		c, err := CancelBecause(ctx, ex, id, now, "replaced by a newer job of key "+strconv.Quote(key)+" (OnConflict Replace)")
		if err != nil || c.Moved || c.Finished {
			return err
		}
		promoted.Add(c.Promoted)
		switch c.State {
		case driver.StateCancelled:
			r.Cancelled = append(r.Cancelled, c)
		case driver.StateRunning:
			r.Stopping = append(r.Stopping, c)
		}
		return nil
	}
	for {
		line, err := ex.LineList(ctx, key, replaceBatch)
		if err != nil {
			return r, promoted, err
		}
		for _, b := range line {
			if err := cancel(b.JobID); err != nil {
				return r, promoted, err
			}
		}
		if len(line) < replaceBatch {
			break
		}
	}
	seen := map[int64]bool{}
	for {
		holders, err := ex.HolderList(ctx, key, replaceBatch)
		if err != nil {
			return r, promoted, err
		}
		n := 0
		for _, h := range holders {
			if seen[h.JobID] || (h.Running && !running) {
				continue
			}
			seen[h.JobID] = true
			n++
			if err := cancel(h.JobID); err != nil {
				return r, promoted, err
			}
		}
		if n == 0 || len(holders) < replaceBatch {
			break
		}
	}
	return r, promoted, nil
}

// debounceJoin joins debounced job j to its key's job of its kind and
// queue still waiting to come due (a first attempt, scheduled; the
// newest if several), with the key locked: that job is moved to come due
// at j's time, bounded by j.DebounceMaxWait from its own enqueue, and
// takes j's args unless j.DebounceFirst. It returns the job joined, or 0
// when none was waiting (j starts a burst of its own). Other scheduled
// jobs of the key (another kind's, a retry's) are left alone.
func debounceJoin(ctx context.Context, ex driver.Executor, j *driver.NewJob, now time.Time) (int64, error) {
	waiting, err := ex.JobList(ctx, driver.JobFilter{Key: j.Limit.Key, Kinds: []string{j.Kind}, Queues: []string{j.Queue},
		States: []driver.JobState{driver.StateScheduled}, Max: replaceBatch})
	if err != nil {
		return 0, err
	}
	for _, w := range waiting {
		if w.Attempt != 0 {
			continue
		}
		at := j.ScheduledAt
		if j.DebounceMaxWait > 0 {
			at = minTime(at, w.CreatedAt.Add(j.DebounceMaxWait))
		}
		p := driver.DebounceParams{JobID: w.ID, At: at, Now: now, Args: j.Args}
		if j.DebounceFirst {
			p.Args = nil
		}
		ok, err := ex.ScheduledDebounce(ctx, p)
		if err != nil {
			return 0, err
		}
		if ok {
			return w.ID, nil
		}
		// It came due meanwhile: it runs as it is, and j starts a burst.
		return 0, nil
	}
	return 0, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
