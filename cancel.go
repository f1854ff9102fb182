package bq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/metrics"
	"github.com/bqueue/bq/internal/worker"
)

var (
	// ErrCancelled is the cancellation cause of a run whose job was
	// cancelled (Client.Cancel from any process): read it with
	// context.Cause(ctx); ctx.Err() is context.Canceled. It also matches
	// the error bq.Cancel returns (errors.Is).
	ErrCancelled = errors.New("bq: job cancelled")
	// ErrJobFinished is returned by Cancel for a job already completed,
	// discarded or cancelled: nothing changed.
	ErrJobFinished = errors.New("job is finished")
)

// maxCancelTries bounds how often Cancel reads a job again that moved
// between its read and its change (claimed, promoted, come due).
const maxCancelTries = 10

// Cancel cancels job id and returns its state after the call:
//
//   - ready, blocked, scheduled or failed: StateCancelled at once. A ready
//     keyed job's slot passes to the next blocked job of its key in the
//     same transaction; a blocked job leaves the line; no limit is
//     bypassed.
//   - running: StateRunning, meaning the cancel is requested. The process
//     running it (whichever it is) is woken and cancels the run's context
//     with cause ErrCancelled. The job keeps its slot while its code may
//     still run: when the run returns an error (ctx's included) the job
//     finishes cancelled, not retried, and only then frees its slot; a run
//     that returns nil did its work and completes. A claim reaped after
//     its process died finishes cancelled too.
//
// A job already finished gets ErrJobFinished, an unknown id
// ErrJobNotFound; neither changes anything. A cancel racing the job's own
// end (completion, retry, reaping) records exactly one ending.
func (c *Client) Cancel(ctx context.Context, id int64) (JobState, error) {
	for range maxCancelTries {
		var out lifecycle.Cancellation
		err := driver.InTx(ctx, c.drv, func(ex driver.Executor) (err error) {
			out, err = lifecycle.Cancel(ctx, ex, id, c.cfg.Now())
			return err
		})
		switch {
		case err != nil:
			return "", fmt.Errorf("cancel job %d: %w", id, c.explainErr(ctx, err))
		case out.Job == nil:
			return "", fmt.Errorf("cancel job %d: %w", id, ErrJobNotFound)
		case out.Moved:
			continue // it moved on meanwhile: cancel it where it is now
		case out.Finished:
			return "", fmt.Errorf("cancel job %d: %w: it is %s; nothing changed", id, ErrJobFinished, out.State)
		}
		job := out.Job
		log := c.log.With("job_id", id, "kind", job.Kind, "queue", job.Queue, "key", job.Limit.Key)
		switch out.State {
		case driver.StateCancelled:
			log.Info("job cancelled by hand")
			c.met.Cancelled(ctx, metrics.JobOf(job), "client")
			if n := out.Promoted.Jobs; n > 0 {
				c.met.PromotedBlocked(ctx, job.Limit.Key, n)
			}
			c.rt.ReadyAll(out.Promoted.Queues)
		case driver.StateRunning:
			log.Info("cancel of running job requested; its run's context is cancelled, its slot frees when the run ends",
				"requested_at", out.RequestedAt)
			// Every process, this one too, looks for its marked runs now.
			c.rt.Ready(worker.CancelSignal)
		}
		return JobState(out.State), nil
	}
	return "", fmt.Errorf("cancel job %d: it changed state %d times while being cancelled; call Cancel again", id, maxCancelTries)
}

// Cancel returns an error that ends the run, and the job, as cancelled:
// no retry, err's text recorded as its last error (err may be nil), and
// its slot released to the next blocked job of its key in the same
// transaction, as a completion does. Return it from a job that finds it
// has nothing left to do, or must not be tried again.
func Cancel(err error) error { return &worker.CancelError{Err: err, Sentinel: ErrCancelled} }

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
// for good. A failed job of a sequence that halts
// (Concurrency.SequenceHaltOnFailure) still holds its key's slot, so it is
// ready at once.
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
// and the job finishes as discarded. A failed job of a sequence that
// halts (Concurrency.SequenceHaltOnFailure) gives its key's slot to the
// next job of the sequence.
func (c *Client) DiscardFailed(ctx context.Context, id int64) error {
	var job *driver.Job
	var woken driver.Promotion
	err := driver.InTx(ctx, c.drv, func(ex driver.Executor) (err error) {
		job, woken, err = lifecycle.DiscardFailed(ctx, ex, id, c.cfg.Now())
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
	c.rt.ReadyAll(woken.Queues) // the next job of a halted sequence
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
