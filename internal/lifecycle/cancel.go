package lifecycle

import (
	"context"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/ratelimit"
	"github.com/bqueue/bq/internal/semaphore"
)

// CancelledMessage is the error recorded for a run cut short by a cancel
// that returned no error of its own (a shutdown ended it).
const CancelledMessage = "cancelled: a cancel was requested while the job ran"

// Cancellation is what one Cancel step did.
type Cancellation struct {
	// Job is the job read; nil when it does not exist.
	Job *driver.Job
	// State is the job's state after the step: cancelled; running, when
	// its claim was marked (it ends as its run ends); or the finished
	// state it already had, changing nothing.
	State driver.JobState
	// RequestedAt is the claim's cancel mark, for a running job.
	RequestedAt time.Time
	// Moved: the job left the state it was read in before the step could
	// take it out (claimed, promoted, come due, completed); nothing
	// changed, and the caller reads it again in a new transaction.
	Moved bool
	// Finished: the job had already ended (State says how); nothing
	// changed.
	Finished bool
	// Promoted is what took the slot a cancelled ready job released.
	Promoted driver.Promotion
}

// Cancel cancels job id in whichever live state it is, going through the
// key's semaphore like every other path:
//
//   - ready: with the key's semaphore locked, its ready row is deleted,
//     the job finishes cancelled, and its slot is released and passed to
//     the next blocked job;
//   - blocked: it leaves the line (the blocked count drops; no slot
//     changes) and finishes cancelled; a job that kept the jobs behind it
//     waiting (several slots or keys) lets its line be promoted;
//   - scheduled or failed: its row is deleted and it finishes cancelled;
//     a sequence's job holding its key's slot there (a retry, a halting
//     failure) releases it, passed to the next blocked job, as a ready
//     job does;
//   - running: its claim is marked. The slot stays held: the run may
//     still execute, so the job ends, and frees its slot, only as its run
//     ends or its claim is reaped (see CancelRun).
//
// Each step deletes exactly the row it read, so a job that moved meanwhile
// (Moved) is never finished twice: the delete, or for a running job the
// claim row, decides the race.
func Cancel(ctx context.Context, ex Store, id int64, now time.Time) (Cancellation, error) {
	return CancelBecause(ctx, ex, id, now, "")
}

// CancelBecause is Cancel recording why as the cancelled job's last error
// (Explain shows it); a running job's mark records nothing.
func CancelBecause(ctx context.Context, ex Store, id int64, now time.Time, why string) (Cancellation, error) {
	info, ok, err := ex.JobGet(ctx, id)
	if err != nil || !ok {
		return Cancellation{}, err
	}
	job := &info.Job
	out := Cancellation{Job: job, State: info.State}
	key := job.Limit.Key
	take := func() (bool, error) { return ex.ExecutionDelete(ctx, info.State, id) }
	var took bool
	switch info.State {
	case driver.StateRunning:
		at, marked, err := ex.ClaimMarkCancel(ctx, id, now)
		if err != nil {
			return Cancellation{}, err
		}
		out.RequestedAt, out.Moved = at, !marked
		return out, nil
	case driver.StateReady:
		// Its keys locked before the ready row, in key order, as admission
		// and promotion do.
		if err := lockKeys(ctx, ex, job); err != nil {
			return Cancellation{}, err
		}
		if job.Rate.Key != "" {
			// Its reserved start slot, if any, goes back to the ring.
			return cancelRated(ctx, ex, out, take, false, why, now)
		}
		took, err = take()
	case driver.StateBlocked:
		if line, ok, err := ex.LineGetKey(ctx, id); err != nil {
			return Cancellation{}, err
		} else if ok && job.Rate.Key != "" && line == driver.RateLine(job.Rate.Key) {
			// It waits for a start holding its keys' slots: locked
			// first, as admission does, and released below.
			if err := lockKeys(ctx, ex, job); err != nil {
				return Cancellation{}, err
			}
			return cancelRated(ctx, ex, out, take, true, why, now)
		} else if ok {
			key = line // a multi-key job waits in the line of one of its keys
		}
		took, out.Promoted, err = semaphore.Leave(ctx, ex, key, driver.HeadByHead(len(job.Keys()), job.Slots), take, now)
	case driver.StateScheduled, driver.StateFailed, driver.StateWaiting:
		took, err = take()
	default:
		out.Finished = true
		return out, nil
	}
	if err != nil {
		return Cancellation{}, err
	}
	if !took {
		out.Moved = true
		return out, nil
	}
	if err := ex.JobCancel(ctx, driver.JobCancelParams{JobID: id, Now: now, Ran: false, Msg: why}); err != nil {
		return Cancellation{}, err
	}
	// A held sequence job's scheduled (or failed) row goes before its
	// key's lock, the order the dispatcher taking it due locks them in.
	if info.State == driver.StateReady || job.SlotHeld {
		if out.Promoted, err = releaseJob(ctx, ex, job, now); err != nil {
			return Cancellation{}, err
		}
	}
	if info.State != driver.StateFailed { // a failed job's dependents learnt it as it failed
		more, err := Settle(ctx, ex, []Ending{{JobID: id}}, now)
		if err != nil {
			return Cancellation{}, err
		}
		out.Promoted.Add(more)
	}
	out.State = driver.StateCancelled
	return out, nil
}

// cancelRated cancels a ready or rate-waiting job of a rate key, the
// rate row locked after the key's semaphore (the order admission takes
// them in): a ready job's reserved slot goes back to the ring, and a
// waiting one leaves the line; then the slot of its concurrency key, if
// it has one, is released as for any holder.
func cancelRated(ctx context.Context, ex Store, out Cancellation, take func() (bool, error), waiting bool, why string, now time.Time) (Cancellation, error) {
	job := out.Job
	w, err := ratelimit.Lock(ctx, ex, job.Rate, job.Queue, now)
	if err != nil {
		return Cancellation{}, err
	}
	if took, err := take(); err != nil || !took {
		out.Moved = err == nil
		return out, err
	}
	// A nil w: no rate at all (see ratelimit.Lock), no slot or line to leave.
	if w != nil {
		if err := leaveRate(ctx, ex, w, job, waiting); err != nil {
			return Cancellation{}, err
		}
		out.Promoted.Add(w.Promoted())
	}
	if err := ex.JobCancel(ctx, driver.JobCancelParams{JobID: job.ID, Now: now, Ran: false, Msg: why}); err != nil {
		return Cancellation{}, err
	}
	p, err := releaseJob(ctx, ex, job, now)
	if err != nil {
		return Cancellation{}, err
	}
	out.Promoted.Add(p)
	if p, err = Settle(ctx, ex, []Ending{{JobID: job.ID}}, now); err != nil {
		return Cancellation{}, err
	}
	out.Promoted.Add(p)
	out.State = driver.StateCancelled
	return out, nil
}

// lockKeys locks the semaphores of every key of j, in key order.
func lockKeys(ctx context.Context, ex Store, j *driver.Job) error {
	for _, k := range keyNames(j.Keys()) {
		if _, _, err := ex.SemaphoreLock(ctx, k, ""); err != nil {
			return err
		}
	}
	return nil
}

// leaveRate takes a cancelled job out of its rate key's window: out of
// the line, or its reserved slot back to the ring; then the line moves.
func leaveRate(ctx context.Context, ex Store, w *ratelimit.Window, job *driver.Job, waiting bool) error {
	if waiting {
		w.Wait(-1)
	} else if err := ex.RateSlotCancelReservation(ctx, job.Rate.Key, job.ID); err != nil {
		return err
	}
	if err := w.PromoteLine(ctx); err != nil {
		return err
	}
	return w.Save(ctx)
}

// CancelRun ends a run as cancelled: the job asked for it (bq.Cancel), or
// its claim was marked and the run ended with an error. As a completion
// does, it deletes the claim by fence, finishes the job (its attempt
// counted, msg its last error, no retry) and releases the slot to the
// next blocked job, in the caller's transaction.
func CancelRun(ctx context.Context, ex Store, c *driver.Claim, msg string, now time.Time) (Result, error) {
	if ok, err := ex.ClaimDelete(ctx, c.ID, c.Fence); !ok || err != nil {
		return Result{}, err
	}
	if err := ex.JobCancel(ctx, driver.JobCancelParams{JobID: c.ID, Now: now, Ran: true, Msg: msg}); err != nil {
		return Result{}, err
	}
	promoted, err := release(ctx, ex, c, now)
	if err != nil {
		return Result{}, err
	}
	more, err := Settle(ctx, ex, []Ending{{JobID: c.ID}}, now)
	promoted.Add(more)
	return Result{Matched: true, State: driver.StateCancelled, Promoted: promoted}, err
}

// cancelIfMarked ends the run as cancelled when its claim carries a
// cancel mark; done is false, having changed nothing, when it does not.
// Every end of a run but a completion asks it first: a run that failed,
// snoozed, was cut short or lost after a cancel was asked for is not run
// again.
func cancelIfMarked(ctx context.Context, ex Store, c *driver.Claim, msg string, now time.Time) (r Result, done bool, err error) {
	marked, err := ex.ClaimCancelRequested(ctx, c.ID, c.Fence)
	if err != nil || !marked {
		return Result{}, false, err
	}
	r, err = CancelRun(ctx, ex, c, msg, now)
	return r, true, err
}
