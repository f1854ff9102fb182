package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/semaphore"
)

// Each function below starts by deleting the claim by job id and fence.
// Only the transaction whose delete matched may go on: a stale worker (its
// claim reaped, maybe claimed again by another) records nothing and
// releases nothing, so a slot is never freed twice.

// Result is what one step did, for the caller's logs and metrics.
type Result struct {
	// Matched: the claim was still the caller's (its fence matched).
	// When false, nothing changed.
	Matched bool
	// State is the job's state after the step.
	State driver.JobState
	// Promoted is what took the slot the step released (blocked jobs of
	// the job's key), or was promoted as the job was admitted again, and
	// the jobs waiting for it that it made ready.
	Promoted driver.Promotion
	// HasDependents (CompleteMany): jobs wait for the job; SettleMany
	// takes them.
	HasDependents bool
}

// Woken lists the queues whose workers the step gave work: those of the
// jobs it promoted, and queue, the job's own, when it left the job ready.
func (r Result) Woken(queue string) []string {
	p := driver.Promotion{Queues: slices.Clone(r.Promoted.Queues)}
	if r.Matched && r.State == driver.StateReady {
		p.AddQueue(queue)
	}
	return p.Queues
}

// release gives back the slots a keyed job held and returns what blocked
// jobs took them.
func release(ctx context.Context, ex Store, c *driver.Claim, now time.Time) (driver.Promotion, error) {
	return releaseJob(ctx, ex, &c.Job, now)
}

// releaseJob gives back the slots j holds of every one of its keys (one,
// or its Slots), the keys locked in sorted order, all before any line is
// promoted.
func releaseJob(ctx context.Context, ex Store, j *driver.Job, now time.Time) (driver.Promotion, error) {
	keys := keyNames(j.Keys())
	n := driver.SlotsOf(j.Slots)
	switch len(keys) {
	case 0:
		return driver.Promotion{}, nil
	case 1:
		return semaphore.ReleaseN(ctx, ex, keys[0], n, now)
	}
	counts := make([]int, len(keys))
	for i := range counts {
		counts[i] = n
	}
	ps, err := semaphore.ReleaseMany(ctx, ex, keys, counts, now)
	var p driver.Promotion
	for _, o := range ps {
		p.Add(o)
	}
	return p, err
}

// keyNames is the sorted names of limits.
func keyNames(limits []driver.Limit) []string {
	out := make([]string, len(limits))
	for i, l := range limits {
		out[i] = l.Key
	}
	slices.Sort(out)
	return out
}

// Complete records a successful run. With keep false the job row is
// deleted instead of kept as finished.
func Complete(ctx context.Context, ex Store, c *driver.Claim, keep bool, now time.Time) (Result, error) {
	if ok, err := ex.ClaimDelete(ctx, c.ID, c.Fence); !ok || err != nil {
		return Result{}, err
	}
	var err error
	if keep {
		err = ex.JobFinish(ctx, c.ID, now, false)
	} else {
		err = ex.JobDeleteMany(ctx, []int64{c.ID})
	}
	if err != nil {
		return Result{}, err
	}
	promoted, err := release(ctx, ex, c, now)
	if err != nil {
		return Result{}, err
	}
	more, err := Settle(ctx, ex, []Ending{{JobID: c.ID, Completed: true}}, now)
	promoted.Add(more)
	return Result{Matched: true, State: driver.StateCompleted, Promoted: promoted}, err
}

// Retry records a failed attempt and schedules the next one at `at`. The
// slot is released before the retry is admitted, so the retry competes
// for it like any job and is not discarded by its own failing run; a
// retry due now is admitted at once, after any job already blocked.
// A sequence's job keeps its slot instead (see holdPlace).
func Retry(ctx context.Context, ex Store, c *driver.Claim, msg string, at, now time.Time) (Result, error) {
	if r, done, err := cancelIfMarked(ctx, ex, c, msg, now); done || err != nil {
		return r, err
	}
	if ok, err := ex.ClaimDelete(ctx, c.ID, c.Fence); !ok || err != nil {
		return Result{}, err
	}
	if err := ex.JobFailAttempt(ctx, c.ID, msg); err != nil {
		return Result{}, err
	}
	if inSequence(&c.Job) {
		return holdPlace(ctx, ex, c, at, now)
	}
	promoted, err := release(ctx, ex, c, now)
	if err != nil {
		return Result{}, err
	}
	r := Result{Matched: true, State: driver.StateScheduled, Promoted: promoted}
	if at.After(now) {
		row := driver.Execution{JobID: c.ID, Queue: c.Queue, Priority: c.Priority, At: at}
		return r, ex.ExecutionInsertMany(ctx, driver.StateScheduled, []driver.Execution{row})
	}
	outcomes, more, err := admitExisting(ctx, ex, []*driver.Job{&c.Job}, now)
	if err != nil {
		return Result{}, err
	}
	r.State = outcomes[0]
	r.Promoted.Add(more)
	return r, nil
}

// Snooze ends a run that asked to run again at `at`, later, without
// counting the attempt or recording an error: the slot is released (and
// handed to the next blocked job) and the job is scheduled, to be
// admitted again when due like any scheduled job. A sequence's job keeps
// its slot and its place instead (see holdPlace).
func Snooze(ctx context.Context, ex Store, c *driver.Claim, at, now time.Time) (Result, error) {
	return snooze(ctx, ex, c, at, now, nil)
}

// snooze is Snooze, calling before (when not nil) once the claim is
// deleted, before the slot is released.
func snooze(ctx context.Context, ex Store, c *driver.Claim, at, now time.Time, before func() error) (Result, error) {
	if !at.After(now) {
		return Result{}, fmt.Errorf("snooze job %d: due at %s, not after now (%s)", c.ID, at, now)
	}
	if r, done, err := cancelIfMarked(ctx, ex, c, CancelledMessage, now); done || err != nil {
		return r, err
	}
	if ok, err := ex.ClaimDelete(ctx, c.ID, c.Fence); !ok || err != nil {
		return Result{}, err
	}
	if before != nil {
		if err := before(); err != nil {
			return Result{}, err
		}
	}
	if inSequence(&c.Job) {
		return holdPlace(ctx, ex, c, at, now)
	}
	promoted, err := release(ctx, ex, c, now)
	if err != nil {
		return Result{}, err
	}
	row := driver.Execution{JobID: c.ID, Queue: c.Queue, Priority: c.Priority, At: at}
	if err := ex.ExecutionInsertMany(ctx, driver.StateScheduled, []driver.Execution{row}); err != nil {
		return Result{}, err
	}
	return Result{Matched: true, State: driver.StateScheduled, Promoted: promoted}, nil
}

// Fail records a last failed attempt and moves the job to failed.
func Fail(ctx context.Context, ex Store, c *driver.Claim, msg string, now time.Time) (Result, error) {
	if r, done, err := cancelIfMarked(ctx, ex, c, msg, now); done || err != nil {
		return r, err
	}
	return fail(ctx, ex, c, msg, now)
}

func fail(ctx context.Context, ex Store, c *driver.Claim, msg string, now time.Time) (Result, error) {
	if ok, err := ex.ClaimDelete(ctx, c.ID, c.Fence); !ok || err != nil {
		return Result{}, err
	}
	if err := ex.JobFailAttempt(ctx, c.ID, msg); err != nil {
		return Result{}, err
	}
	if err := ex.FailedInsert(ctx, c.ID, msg, now); err != nil {
		return Result{}, err
	}
	var promoted driver.Promotion
	if inSequence(&c.Job) && c.Limit.SequenceHalt {
		// The sequence halts: the failed job keeps the slot until it is
		// retried or discarded by hand (RetryFailed, DiscardFailed).
		if err := ex.JobHoldSlot(ctx, c.ID, true); err != nil {
			return Result{}, err
		}
	} else {
		var err error
		if promoted, err = release(ctx, ex, c, now); err != nil {
			return Result{}, err
		}
	}
	// Its dependents learn it failed, however its key goes on.
	more, err := Settle(ctx, ex, []Ending{{JobID: c.ID}}, now)
	promoted.Add(more)
	return Result{Matched: true, State: driver.StateFailed, Promoted: promoted}, err
}

// Unclaim puts a claimed job back to ready without counting the attempt,
// as a worker shuts down before the job ends. It keeps its slot: it is
// still a holder, now waiting to be claimed again. A claim marked for
// cancel finishes cancelled instead.
func Unclaim(ctx context.Context, ex Store, c *driver.Claim, now time.Time) (Result, error) {
	if r, done, err := cancelIfMarked(ctx, ex, c, CancelledMessage, now); done || err != nil {
		return r, err
	}
	if ok, err := ex.ClaimDelete(ctx, c.ID, c.Fence); !ok || err != nil {
		return Result{}, err
	}
	row := driver.Execution{JobID: c.ID, Queue: c.Queue, Priority: c.Priority, At: now}
	return Result{Matched: true, State: driver.StateReady}, ex.ExecutionInsertMany(ctx, driver.StateReady, []driver.Execution{row})
}

// ReapMessage is the error recorded for an attempt whose process died.
const ReapMessage = "process lost: the worker running this job stopped heartbeating"

// Reap ends a claim whose run was lost: its process stopped
// heartbeating (the reaper), or the run stopped itself as its lease lapsed
// (the worker). The attempt counts, with msg as its error; the job goes
// back to ready keeping its slot, or fails once its attempts are spent.
// A claim marked for cancel finishes cancelled, its slot released.
func Reap(ctx context.Context, ex Store, c *driver.Claim, msg string, now time.Time) (Result, error) {
	if r, done, err := cancelIfMarked(ctx, ex, c, msg, now); done || err != nil {
		return r, err
	}
	if c.Attempt+1 >= c.MaxAttempts {
		return fail(ctx, ex, c, msg, now)
	}
	if ok, err := ex.ClaimDelete(ctx, c.ID, c.Fence); !ok || err != nil {
		return Result{}, err
	}
	if err := ex.JobFailAttempt(ctx, c.ID, msg); err != nil {
		return Result{}, err
	}
	row := driver.Execution{JobID: c.ID, Queue: c.Queue, Priority: c.Priority, At: now}
	return Result{Matched: true, State: driver.StateReady}, ex.ExecutionInsertMany(ctx, driver.StateReady, []driver.Execution{row})
}

// SettleMany settles the jobs CompleteMany ended that others wait for
// (Settle), in the caller's transaction, adding what it made ready to
// their results.
func SettleMany(ctx context.Context, ex Store, results []Result, claims []*driver.Claim, now time.Time) error {
	var ended []Ending
	first := -1
	for i, r := range results {
		if r.HasDependents {
			ended = append(ended, Ending{JobID: claims[i].ID, Completed: true})
			results[i].HasDependents = false
			if first < 0 {
				first = i
			}
		}
	}
	if first < 0 {
		return nil
	}
	// Together: a dependent of several of them (a batch's callback) is
	// counted down once.
	p, err := Settle(ctx, ex, ended, now)
	results[first].Promoted.Add(p)
	return err
}

// inSequence reports whether j is a sequence's job: its key's jobs run one
// at a time in enqueue order, and a failing job keeps its place.
func inSequence(j *driver.Job) bool { return j.Limit.Sequence && j.Limit.Key != "" }

// holdPlace ends a run of a sequence's job that will run again (a retry, a
// snooze) keeping its key's slot, so the next job of the sequence does not
// start before it: due later, it is scheduled holding the slot (counted as
// a holder of its key until it is admitted, without taking a slot again,
// or cancelled); due now, it goes back to ready, as a reaped job does.
// Nothing is released, so nothing is promoted. The claim is already
// deleted.
func holdPlace(ctx context.Context, ex Store, c *driver.Claim, at, now time.Time) (Result, error) {
	row := driver.Execution{JobID: c.ID, Queue: c.Queue, Priority: c.Priority, At: at}
	if !at.After(now) {
		row.At = now
		return Result{Matched: true, State: driver.StateReady}, ex.ExecutionInsertMany(ctx, driver.StateReady, []driver.Execution{row})
	}
	if err := ex.JobHoldSlot(ctx, c.ID, true); err != nil {
		return Result{}, err
	}
	return Result{Matched: true, State: driver.StateScheduled}, ex.ExecutionInsertMany(ctx, driver.StateScheduled, []driver.Execution{row})
}
