package bq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/humanize"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/metrics"
)

// record writes the run's outcome: complete, snooze, retry, fail, back to
// ready when shutdown cut it short, or lost when its lease lapsed. It runs on
// after Run's context ends (the outcome of finished work must not be
// lost), with retries while the database is unreachable. Logs and metrics
// follow the commit. It returns the outcome, as the run-duration metric
// names it; "unrecorded" when none could be written, "stale" when the
// claim was no longer this run's.
func (w *queueWorker) record(runCtx context.Context, l *lease, meta JobMeta, def definition, runErr error, ran time.Duration) string {
	cl := l.claim
	log := w.c.log.With("job_id", cl.ID, "kind", cl.Kind, "queue", cl.Queue, "key", cl.Limit.Key, "attempt", cl.Attempt+1)
	now := w.c.cfg.Now()
	shutdown := runCtx.Err() != nil && errors.Is(context.Cause(runCtx), errShutdown)
	fenced := !shutdown && l.fenced.Load()
	ctx := w.recordCtx
	startedLate := errors.Is(runErr, errStartedLate) && !fenced
	if runErr != nil && !shutdown && !fenced && !l.cancelled.Load() && !cancelOf(runErr) && !startedLate {
		if _, snoozed := snoozeOf(runErr); !snoozed {
			// Before the outcome's transaction: the handler is user code.
			runErr = w.c.handleError(runCtx, meta, runErr)
		}
	}
	var action func(ex driver.Executor) (lifecycle.Result, error)
	var retryAt time.Time
	var msg string
	if runErr != nil {
		msg = errorText(runErr.Error())
		if l.cancelled.Load() && errors.Is(runErr, context.Canceled) {
			// "context canceled" says less than why.
			msg = errorText(runErr.Error() + ": " + context.Cause(runCtx).Error())
		}
	}
	snooze, snoozed := snoozeOf(runErr)
	snoozed = snoozed && !shutdown && !fenced
	// The job's own bq.Cancel is honoured even as a shutdown cut it short:
	// it asked not to run again.
	selfCancel := runErr != nil && !fenced && cancelOf(runErr)
	switch {
	case runErr == nil:
		action = nil // batched by the completer
	case startedLate:
		action = func(ex driver.Executor) (lifecycle.Result, error) { return lifecycle.StartedLate(ctx, ex, cl, now) }
	case selfCancel:
		action = func(ex driver.Executor) (lifecycle.Result, error) { return lifecycle.CancelRun(ctx, ex, cl, msg, now) }
	case shutdown:
		action = func(ex driver.Executor) (lifecycle.Result, error) { return lifecycle.Return(ctx, ex, cl, now) }
	case fenced:
		// Not the job's failure: its run was stopped so that no other
		// could start beside it. If the claim is still this run's, the
		// attempt counts and the job is ready again with its slot, as
		// if reaped.
		msg = lifecycle.LostMessage
		if cause := context.Cause(runCtx); cause != nil {
			msg = errorText(cause.Error())
		}
		action = func(ex driver.Executor) (lifecycle.Result, error) { return lifecycle.Reap(ctx, ex, cl, msg, now) }
	case snoozed:
		retryAt = now.Add(snooze)
		action = func(ex driver.Executor) (lifecycle.Result, error) {
			return lifecycle.Snooze(ctx, ex, cl, retryAt, now)
		}
	case isPermanent(runErr) || cl.Attempt+1 >= cl.MaxAttempts:
		action = func(ex driver.Executor) (lifecycle.Result, error) {
			return lifecycle.Fail(ctx, ex, cl, msg, now)
		}
	default:
		retryAt = now.Add(def.backoff(cl.Attempt + 1))
		action = func(ex driver.Executor) (lifecycle.Result, error) {
			return lifecycle.Retry(ctx, ex, cl, msg, retryAt, now)
		}
	}
	var res lifecycle.Result
	var err error
	if action == nil {
		res, err = w.completer.complete(cl)
	} else {
		tries := 0
		err = w.c.retryDB(ctx, "record job outcome", func() error {
			if tries++; tries > 1 {
				// The message itself may be what the database refuses
				// (a text its connection's character set cannot hold):
				// never let it keep the outcome, and the slot, from
				// landing.
				msg = asciiText(msg)
			}
			return driver.InTx(ctx, w.c.drv, func(ex driver.Executor) (err error) {
				res, err = action(ex)
				return err
			})
		})
	}
	switch {
	case err != nil:
		log.Error("record job outcome; the claim will be reaped and the job run again", "error", err)
		return "unrecorded"
	case !res.Matched:
		log.Warn("stale completion ignored: this claim was reaped (its process looked dead) and is no longer ours")
		return "stale"
	}

	job := metrics.JobOf(&cl.Job)
	outcome := "retried"
	switch {
	case res.State == driver.StateCancelled:
		// Asked for by the job itself, or by a cancel that marked its
		// claim (every end but a completion then finishes it cancelled).
		outcome = "cancelled"
		from := "client"
		if selfCancel {
			from = "job"
		}
		log.Info("job cancelled; its slot released", "from", from, "error", runErr, "duration", ran)
		w.c.met.Cancelled(ctx, job, from)
	case startedLate:
		outcome = "requeued"
		log.Warn("rate-limited job did not begin within its start slack of the claim (the process stalled); back in its rate line, not run",
			"rate_key", cl.Rate.Key, "start_by", cl.StartBy)
	case shutdown:
		outcome = "returned"
		log.Info("job cut short by shutdown; returned to ready with its slot", "duration", ran)
	case fenced:
		outcome = "lost"
		log.Warn("run stopped as its lease lapsed; the job is ready again with its slot, its attempt counted",
			"state", res.State, "cause", context.Cause(runCtx))
	case snoozed:
		outcome = "snoozed"
		log.Debug("job snoozed; its slot released, it runs again when due", "duration", ran, "run_at", retryAt)
	case runErr == nil:
		outcome = "completed"
		log.Debug("job completed", "duration", ran)
	case res.State == driver.StateFailed:
		outcome = "failed"
		log.Error("job failed for good", "error", runErr, "permanent", isPermanent(runErr), "max_attempts", cl.MaxAttempts)
	default:
		log.Warn("job failed; will retry", "error", runErr, "retry_at", retryAt, "state", res.State)
	}
	w.c.met.Ran(ctx, job, ran.Seconds(), outcome)
	if outcome == "completed" || outcome == "retried" || outcome == "failed" {
		w.c.tally.count(cl.Queue, now, runErr != nil)
	}
	switch {
	case outcome == "cancelled":
	case snoozed:
		w.c.met.Snoozed(ctx, job)
	case startedLate:
	case !shutdown:
		w.c.met.Finished(ctx, job, res.State)
	}
	if n := res.Promoted.Jobs; n > 0 {
		log.Debug("promoted blocked jobs into the released slot", "count", n)
		w.c.met.PromotedBlocked(ctx, cl.Limit.Key, n)
	}
	// The slot may have passed to a blocked job of any queue, in any
	// process; a job returned or retried at once is ready itself.
	w.c.readyAll(res.Woken(cl.Queue))
	return outcome
}

// maxErrorBytes bounds the error message stored with a failed attempt: a
// job may fail with any text, of any size.
const maxErrorBytes = 64 << 10

// errorText is an error message as every database stores it: valid UTF-8,
// no NUL byte (PostgreSQL refuses both in text), at most maxErrorBytes.
func errorText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", `\x00`)
	if cut, long := humanize.Clip(s, maxErrorBytes); long {
		return cut + fmt.Sprintf("… (%d bytes in all)", len(s))
	}
	return s
}

// asciiText is s with every byte outside printable ASCII escaped, which
// any character set holds.
func asciiText(s string) string {
	q := strconv.QuoteToASCII(s)
	return q[1 : len(q)-1]
}
