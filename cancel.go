package bq

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// PauseQueue stops every process from claiming jobs of queue, within one
// poll, until ResumeQueue; the pause is stored in the database, so it
// needs no deploy and survives restarts. Enqueues still succeed. Jobs
// already running finish; ready jobs of keyed limits keep their slots
// while paused (docs/limits.md). Pausing a paused queue changes nothing,
// and a queue no job uses yet may be paused ahead of its first job: when
// no job kind defined in this process, no queue of Config.Queues and no
// stored job uses it, PauseQueue pauses it and logs a warning, since the
// name may be a typo of the queue meant.
func (c *Client) PauseQueue(ctx context.Context, queue string) error {
	if err := validateQueue(queue); err != nil {
		return fmt.Errorf("%w: PauseQueue: %w", ErrInvalidArgument, err)
	}
	if _, err := c.drv.Exec().QueuePause(ctx, queue, c.cfg.Now()); err != nil {
		return c.explainErr(ctx, err)
	}
	if !c.queueUsed(ctx, queue) {
		c.log.Warn(fmt.Sprintf("PauseQueue(%q): no job kind defined in this process and no stored job uses the queue; it is paused anyway, ahead of its first job: check the name if you meant another queue", queue),
			"queue", queue)
	}
	return nil
}

// queueUsed reports whether a job kind defined in this process, the
// client's Config.Queues or a stored job (one look at the jobs' queue
// index) uses queue; true when the look fails: the warning it would
// feed is no reason to fail a pause that is done.
func (c *Client) queueUsed(ctx context.Context, queue string) bool {
	if _, ok := c.cfg.Queues[queue]; ok {
		return true
	}
	if _, ok := defined.queues()[queue]; ok {
		return true
	}
	page, err := c.ListJobs(ctx, JobFilter{Queues: []string{queue}, Limit: 1})
	return err != nil || len(page.Jobs) > 0
}

// ResumeQueue lets queue's jobs be claimed again and wakes the workers of
// queue in every process, so they claim at once rather than at their next
// poll. Resuming a queue that is not paused changes nothing.
func (c *Client) ResumeQueue(ctx context.Context, queue string) error {
	if err := validateQueue(queue); err != nil {
		return fmt.Errorf("%w: ResumeQueue: %w", ErrInvalidArgument, err)
	}
	if _, err := c.drv.Exec().QueueResume(ctx, queue); err != nil {
		return c.explainErr(ctx, err)
	}
	c.rt.Ready(queue)
	return nil
}

// PausedQueue is a queue PauseQueue stopped.
type PausedQueue struct {
	Queue    string    `json:"queue"`
	PausedAt time.Time `json:"paused_at"`
}

// PausedQueues lists the paused queues, ordered by name.
func (c *Client) PausedQueues(ctx context.Context) ([]PausedQueue, error) {
	rows, err := c.drv.Exec().QueueListPaused(ctx)
	if err != nil {
		return nil, fmt.Errorf("paused queues: %w", c.explainErr(ctx, err))
	}
	out := make([]PausedQueue, len(rows))
	for i, p := range rows {
		out[i] = PausedQueue(p)
	}
	return out, nil
}

// pausedSet reads the paused queues as a set, for the reports that mark them.
func pausedSet(ctx context.Context, ex driver.PauseStore) (map[string]bool, error) {
	rows, err := ex.QueueListPaused(ctx)
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(rows))
	for _, p := range rows {
		set[p.Queue] = true
	}
	return set, nil
}

// PauseKey stops every process from claiming jobs of the full key (a
// job's concurrency key, bq.Key(group, key), whichever of its keys it
// is) until ResumeKey: one tenant, one downstream API, paused while the
// rest of its queues run. The pause is stored in the database, so it
// needs no deploy and survives restarts; it applies to every claim begun
// after it commits, as a queue's pause does. Enqueues still succeed;
// jobs already running finish and release their slots, which promote
// the key's blocked jobs to ready as usual: its ready jobs keep their
// slots and its blocked jobs their places in line. Pausing a paused key
// changes nothing.
func (c *Client) PauseKey(ctx context.Context, key string) error {
	if err := checkFullKeyArg("PauseKey", key); err != nil {
		return err
	}
	if _, err := c.drv.Exec().KeyPause(ctx, key, c.cfg.Now()); err != nil {
		return fmt.Errorf("pause key %q: %w", key, c.explainErr(ctx, err))
	}
	return nil
}

// ResumeKey lets the key's jobs be claimed again and wakes the workers of
// the queues its ready jobs wait in, in every process. Resuming a key
// that is not paused changes nothing.
func (c *Client) ResumeKey(ctx context.Context, key string) error {
	if err := checkFullKeyArg("ResumeKey", key); err != nil {
		return err
	}
	ex := c.drv.Exec()
	if _, err := ex.KeyResume(ctx, key); err != nil {
		return fmt.Errorf("resume key %q: %w", key, c.explainErr(ctx, err))
	}
	ready, err := ex.JobList(ctx, driver.JobFilter{Key: key, States: []driver.JobState{driver.StateReady}, Max: 1000})
	if err != nil {
		// Resumed: the workers find its jobs at their next poll.
		c.log.Warn("key resumed; waking its workers failed: they claim its jobs at their next poll", "key", key, "error", err)
		return nil
	}
	var queues []string
	for _, j := range ready {
		if !slices.Contains(queues, j.Queue) {
			queues = append(queues, j.Queue)
		}
	}
	c.rt.ReadyAll(queues)
	return nil
}

// PausedKey is a key PauseKey stopped.
type PausedKey struct {
	Key      string    `json:"key"`
	PausedAt time.Time `json:"paused_at"`
}

// PausedKeys lists the paused keys, ordered by key.
func (c *Client) PausedKeys(ctx context.Context) ([]PausedKey, error) {
	rows, err := c.drv.Exec().KeyListPaused(ctx)
	if err != nil {
		return nil, fmt.Errorf("paused keys: %w", c.explainErr(ctx, err))
	}
	out := make([]PausedKey, len(rows))
	for i, p := range rows {
		out[i] = PausedKey(p)
	}
	return out, nil
}

// keyPausedSummary adds to summary, Explain's of a ready or blocked job,
// that one of its keys is paused, when one is.
func keyPausedSummary(ctx context.Context, ex driver.PauseStore, info *JobInfo, summary string, now time.Time) (string, error) {
	if info.Key == "" {
		return summary, nil
	}
	keys, err := ex.KeyListPaused(ctx)
	if err != nil {
		return summary, err
	}
	for _, k := range keys {
		if k.Key == info.Key || slices.Contains(info.Keys, k.Key) {
			return summary + fmt.Sprintf(" Its key %q is paused since %s: no process claims its jobs until it is resumed (client.ResumeKey or `bq key resume`).",
				k.Key, when(k.PausedAt, now)), nil
		}
	}
	return summary, nil
}
