package main

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq"
)

// wait enqueues one more dashboard refresh once the first has finished
// (its slot is free again, so this one is admitted), then waits until no
// job is ready, running, blocked or scheduled.
func (d *demo) wait(ctx context.Context, errs <-chan error) error {
	var first int64
	if ids := d.admits[demoTargets[0]]; len(ids) > 0 {
		first = ids[0]
	}
	return d.poll(ctx, errs, "jobs", func() (bool, error) {
		if first == 0 {
			return d.drained(ctx)
		}
		info, err := d.clients[0].Job(ctx, first)
		if err != nil || info.State != bq.StateCompleted {
			return false, err
		}
		fmt.Fprintf(d.e.stdout, "\nRefresh job %d (%s) has finished, so its slot is free: enqueue one more.\n", first, demoTargets[0])
		first = 0
		return false, d.enqueueRefresh(ctx, demoTargets[0])
	})
}

// poll calls step every 20 ms until it says done or fails, a worker
// stops early, ctx ends or demoDeadline passes (what names the jobs
// still unfinished then).
func (d *demo) poll(ctx context.Context, errs <-chan error, what string, step func() (bool, error)) error {
	deadline := time.After(demoDeadline)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo interrupted: %w", ctx.Err())
		case err := <-errs:
			return fmt.Errorf("a worker stopped early: %w", err)
		case <-deadline:
			return fmt.Errorf("demo: %s still unfinished after %s; see `bq status` and the log above", what, demoDeadline)
		case <-tick.C:
		}
		if done, err := step(); err != nil || done {
			return err
		}
	}
}

// drained reports whether no job is ready, running, blocked or scheduled.
func (d *demo) drained(ctx context.Context) (bool, error) {
	stats, err := d.clients[0].QueueStats(ctx)
	if err != nil {
		return false, err
	}
	for _, s := range stats {
		if s.Ready+s.Running+s.Blocked+s.Scheduled > 0 {
			return false, nil
		}
	}
	return true, nil
}
