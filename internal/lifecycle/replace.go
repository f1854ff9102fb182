package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// replaceBatch is how many of a key's queued jobs Replace reads at a time.
const replaceBatch = 500

// Replace makes room for the jobs of jobs that replace (NewJob.Replace):
// for each of their keys, in key order, it creates the key's semaphore
// if it has none and locks it, then cancels the key's queued jobs, the
// blocked first (they leave the line), then the ready ones (each
// releases its slot, with no blocked job left to take it), and returns
// the ids it cancelled by the index of the job that replaced them. The
// caller then admits jobs in the same transaction, so each replacing
// job takes the place of those it replaced: producers replacing on one
// key take turns on its lock, and each finds only the job the one before
// it left. Running jobs keep their slots. A job claimed meanwhile (its
// ready row gone before the cancel took it) is running, not queued, and
// is left alone.
func Replace(ctx context.Context, ex driver.Executor, jobs []*driver.NewJob, now time.Time) (map[int][]int64, driver.Promotion, error) {
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
	out := map[int][]int64{}
	for _, i := range order {
		j := jobs[i]
		if err := ex.SemaphoreEnsure(ctx, j.Limit, now); err != nil {
			return nil, promoted, err
		}
		if _, _, err := ex.SemaphoreLock(ctx, j.Limit.Key, j.Queue); err != nil {
			return nil, promoted, err
		}
		ids, p, err := cancelQueued(ctx, ex, j.Limit.Key, now)
		if err != nil {
			return nil, promoted, fmt.Errorf("replace the queued jobs of key %q: %w", j.Limit.Key, err)
		}
		promoted.Add(p)
		if len(ids) > 0 {
			out[i] = ids
		}
	}
	return out, promoted, nil
}

// cancelQueued cancels key's blocked jobs, then its ready ones, with the
// key locked, and returns the ids it cancelled.
func cancelQueued(ctx context.Context, ex driver.Executor, key string, now time.Time) ([]int64, driver.Promotion, error) {
	var ids []int64
	var promoted driver.Promotion
	cancel := func(id int64) error {
		c, err := Cancel(ctx, ex, id, now)
		if err != nil {
			return err
		}
		promoted.Add(c.Promoted)
		if c.State == driver.StateCancelled && !c.Moved && !c.Finished {
			ids = append(ids, id)
		}
		return nil
	}
	for {
		line, err := ex.LineList(ctx, key, replaceBatch)
		if err != nil {
			return nil, promoted, err
		}
		for _, b := range line {
			if err := cancel(b.JobID); err != nil {
				return nil, promoted, err
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
			return nil, promoted, err
		}
		n := 0
		for _, h := range holders {
			if h.Running || seen[h.JobID] {
				continue
			}
			seen[h.JobID] = true
			n++
			if err := cancel(h.JobID); err != nil {
				return nil, promoted, err
			}
		}
		if n == 0 || len(holders) < replaceBatch {
			break
		}
	}
	return ids, promoted, nil
}
