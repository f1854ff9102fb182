package bq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/metrics"
)

// ErrJobNotFailed is returned by RetryFailed and DiscardFailed for a job
// that exists but is not failed.
var ErrJobNotFailed = errors.New("job is not failed")

// FailedJob is a job that spent its attempts or failed permanently.
type FailedJob struct {
	JobID    int64
	Kind     string
	Queue    string
	Key      string // full concurrency key; "" when unkeyed
	Attempt  int    // attempts that have ended
	Error    string // the last attempt's error
	FailedAt time.Time
}

// FailedJobs lists up to limit failed jobs (at most 500) with an id below
// before (0: from the newest), newest first: pass the last id of a page to
// get the next.
func (c *Client) FailedJobs(ctx context.Context, before int64, limit int) ([]FailedJob, error) {
	limit = min(max(limit, 1), 500)
	jobs, err := c.drv.Exec().FailedList(ctx, before, limit)
	if err != nil {
		return nil, c.explainErr(ctx, err)
	}
	out := make([]FailedJob, len(jobs))
	for i, j := range jobs {
		out[i] = FailedJob(j)
	}
	return out, nil
}

// RetryFailed gives a failed job one more run and returns what became of
// it. Its failed record is deleted and the job goes through admission
// again, exactly as a scheduled job coming due: StateReady if its key has
// a free slot, StateBlocked behind the key's holders otherwise, or
// StateDiscarded when its kind discards on conflict. Limits are never
// bypassed. Its attempt count is kept, so a job that fails again fails
// for good.
func (c *Client) RetryFailed(ctx context.Context, id int64) (JobState, error) {
	var job *driver.Job
	var state driver.JobState
	var woken driver.Promotion
	err := driver.InTx(ctx, c.drv, func(ex driver.Executor) (err error) {
		job, state, woken, err = lifecycle.RetryFailed(ctx, ex, id, c.cfg.Now())
		return err
	})
	if err != nil {
		return "", fmt.Errorf("retry job %d: %w", id, c.explainErr(ctx, err))
	}
	if job == nil {
		return "", c.notFailed(ctx, "retry", id)
	}
	c.log.Info("failed job retried by hand", "job_id", id, "kind", job.Kind, "queue", job.Queue,
		"key", job.Limit.Key, "state", state)
	c.met.RetriedByHand(ctx, metrics.JobOf(job), state)
	if state == driver.StateReady {
		woken.AddQueue(job.Queue)
	}
	c.rt.ReadyAll(woken.Queues)
	return JobState(state), nil
}

// DiscardFailed gives up on a failed job: its failed record is deleted
// and the job finishes as discarded.
func (c *Client) DiscardFailed(ctx context.Context, id int64) error {
	var job *driver.Job
	err := driver.InTx(ctx, c.drv, func(ex driver.Executor) (err error) {
		job, err = lifecycle.DiscardFailed(ctx, ex, id, c.cfg.Now())
		return err
	})
	if err != nil {
		return fmt.Errorf("discard job %d: %w", id, c.explainErr(ctx, err))
	}
	if job == nil {
		return c.notFailed(ctx, "discard", id)
	}
	c.log.Info("failed job discarded by hand", "job_id", id, "kind", job.Kind, "queue", job.Queue, "key", job.Limit.Key)
	c.met.DiscardedByHand(ctx, metrics.JobOf(job))
	return nil
}

// notFailed explains why a job could not be retried or discarded.
func (c *Client) notFailed(ctx context.Context, verb string, id int64) error {
	info, err := c.Job(ctx, id)
	if err != nil {
		return fmt.Errorf("%s job %d: %w", verb, id, err)
	}
	return fmt.Errorf("%s job %d: %w: it is %s", verb, id, ErrJobNotFailed, info.State)
}
