package worker

// A run's outcome written: complete (through the completer), snooze,
// retry, fail, back to ready, or lost, and the logs and metrics that
// follow its commit.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/humanize"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/metrics"
)

// finish writes the run's outcome: complete, snooze, retry, fail, back to
// ready when shutdown cut it short, or lost when its lease lapsed. It runs on
// after Run's context ends (the outcome of finished work must not be
// lost), with retries while the database is unreachable. Logs and metrics
// follow the commit. It calls done with the outcome, as the run-duration
// metric names it; "unrecorded" when none could be written, "stale" when
// the claim was no longer this run's.
//
// A completion is handed to the completer and finish returns at once: the
// run's slot is free for the next claim while its batch commits (the
// claim, its lease and its key's slot stay the run's until done). Every
// other outcome is written before finish returns.
func (w *queueWorker) finish(runCtx context.Context, l *lease, meta Meta, def Job, runErr error, ran time.Duration, done func(outcome string)) {
	cl := l.claim
	shutdown := runCtx.Err() != nil && errors.Is(context.Cause(runCtx), errShutdown)
	fenced := !shutdown && l.fenced.Load()
	ctx := w.finishCtx
	startedLate := errors.Is(runErr, ErrStartedLate) && !fenced
	if runErr != nil && !shutdown && !fenced && !l.cancelled.Load() && !CancelOf(runErr) && !startedLate {
		_, throttled := ThrottleOf(runErr)
		if _, snoozed := SnoozeOf(runErr); !snoozed && !throttled {
			// Before the outcome's transaction: the handler is user code.
			runErr = w.c.cfg.Jobs.HandleError(runCtx, meta, runErr)
		}
	}
	e := outcome{claim: cl, runErr: runErr, cause: context.Cause(runCtx), ran: ran, now: w.c.cfg.Now(), shutdown: shutdown, fenced: fenced, startedLate: startedLate}
	now := e.now
	if runErr == nil {
		// A key adapts by its kind's Adaptive, else by its queue's policy
		// (counted as a floor of 1: recovery reads no floor).
		adaptive := adaptiveOf(def)
		if adaptive.Key == 0 && cl.Limit.Key != "" && w.c.queueAdapts(cl.Queue) {
			adaptive.Key = 1
		}
		w.completer.complete(cl, adaptive, func(res lifecycle.Result, err error) {
			done(w.report(ctx, e, res, err))
		})
		return
	}
	msg := errorText(runErr.Error())
	if l.cancelled.Load() && errors.Is(runErr, context.Canceled) {
		// "context canceled" says less than why.
		msg = errorText(runErr.Error() + ": " + context.Cause(runCtx).Error())
	}
	snooze, snoozed := SnoozeOf(runErr)
	if d, ok := ThrottleOf(runErr); ok {
		snooze, snoozed, e.throttled = d, true, true
	}
	e.snoozed = snoozed && !shutdown && !fenced
	// The job's own bq.Cancel is honoured even as a shutdown cut it short:
	// it asked not to run again.
	e.selfCancel = !fenced && CancelOf(runErr)
	var action func(ex driver.Executor) (lifecycle.Result, error)
	switch {
	case startedLate:
		action = func(ex driver.Executor) (lifecycle.Result, error) { return lifecycle.StartedLate(ctx, ex, cl, now) }
	case e.selfCancel:
		action = func(ex driver.Executor) (lifecycle.Result, error) { return lifecycle.CancelRun(ctx, ex, cl, msg, now) }
	case shutdown:
		action = func(ex driver.Executor) (lifecycle.Result, error) { return lifecycle.Unclaim(ctx, ex, cl, now) }
	case fenced:
		// Not the job's failure: its run was stopped so that no other
		// could start beside it. If the claim is still this run's, the
		// attempt counts and the job is ready again with its slot, as
		// if reaped.
		msg = lifecycle.ReapMessage
		if cause := context.Cause(runCtx); cause != nil {
			msg = errorText(cause.Error())
		}
		action = func(ex driver.Executor) (lifecycle.Result, error) { return lifecycle.Reap(ctx, ex, cl, msg, now) }
	case e.snoozed && e.throttled:
		e.retryAt = now.Add(snooze)
		floors := adaptiveOf(def)
		action = func(ex driver.Executor) (res lifecycle.Result, err error) {
			// floors.Key 0: the queue's policy says, read under the key's lock.
			res, e.adapted, err = lifecycle.Throttle(ctx, ex, cl, floors, e.retryAt, now)
			if floors.Key == 0 && e.adapted.Key != "" {
				w.c.queueAdapted(cl.Queue) // count its completions from now
			}
			return res, err
		}
	case e.snoozed:
		e.retryAt = now.Add(snooze)
		action = func(ex driver.Executor) (lifecycle.Result, error) {
			return lifecycle.Snooze(ctx, ex, cl, e.retryAt, now)
		}
	case IsPermanent(runErr) || cl.Attempt+1 >= cl.MaxAttempts:
		action = func(ex driver.Executor) (lifecycle.Result, error) {
			return lifecycle.Fail(ctx, ex, cl, msg, now)
		}
	default:
		e.retryAt = now.Add(def.Backoff(cl.Attempt + 1))
		action = func(ex driver.Executor) (lifecycle.Result, error) {
			return lifecycle.Retry(ctx, ex, cl, msg, e.retryAt, now)
		}
	}
	var res lifecycle.Result
	tries := 0
	err := w.c.retryDB(ctx, "record job outcome", func() error {
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
	done(w.report(ctx, e, res, err))
}

// outcome is how a run ended, as record judged it.
type outcome struct {
	claim                                              *driver.Claim
	runErr                                             error
	cause                                              error // of the run's context ending, if it did
	ran                                                time.Duration
	now, retryAt                                       time.Time
	shutdown, fenced, startedLate, snoozed, selfCancel bool
	throttled                                          bool              // snoozed by bq.Throttled
	adapted                                            lifecycle.Adapted // what the throttle did to its key's limit
}

// report logs and counts the outcome of e that record wrote (res), or
// failed to write (err), and names it.
func (w *queueWorker) report(ctx context.Context, e outcome, res lifecycle.Result, err error) string {
	cl, runErr, ran := e.claim, e.runErr, e.ran
	log := runLog{ctx: ctx, log: w.c.log, claim: cl}
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
		if e.selfCancel {
			from = "job"
		}
		log.Info("job cancelled; its slot released", "from", from, "error", runErr, "duration", ran)
		w.c.met.Cancelled(ctx, job, from)
	case e.startedLate:
		outcome = "requeued"
		log.Warn("rate-limited job did not begin within its start slack of the claim (the process stalled); back in its rate line, not run; the process's next claims allow for the lag",
			"rate_key", cl.Rate.Key, "start_by", cl.StartBy, "start_slack", cl.StartSlack, "late_by", e.now.Sub(cl.StartBy))
	case e.shutdown:
		outcome = "returned"
		log.Info("job cut short by shutdown; returned to ready with its slot", "duration", ran)
	case e.fenced:
		outcome = "lost"
		log.Warn("run stopped as its lease lapsed; the job is ready again with its slot, its attempt counted",
			"state", res.State, "cause", e.cause)
	case e.snoozed && e.throttled:
		outcome = "throttled"
		log.Info("job throttled by its downstream; its slot released, it runs again when due, no attempt spent",
			"error", runErr, "duration", ran, "run_at", e.retryAt, "limit_from", e.adapted.From, "limit_to", e.adapted.To,
			"rate_from", e.adapted.RateFrom, "rate_to", e.adapted.RateTo)
	case e.snoozed:
		outcome = "snoozed"
		log.Debug("job snoozed; its slot released, it runs again when due", "duration", ran, "run_at", e.retryAt)
	case runErr == nil:
		outcome = "completed"
		log.Debug("job completed", "duration", ran)
	case res.State == driver.StateFailed:
		outcome = "failed"
		why := "its attempts are spent"
		if IsPermanent(runErr) {
			why = "bq.Permanent"
		}
		log.Error("job failed for good: "+why, "error", runErr, "attempt", cl.Attempt+1, "max_attempts", cl.MaxAttempts)
	default:
		log.Warn("job failed; will retry", "error", runErr, "retry_at", e.retryAt, "state", res.State)
	}
	w.c.met.Ran(ctx, job, ran.Seconds(), outcome)
	if outcome == "completed" || outcome == "retried" || outcome == "failed" {
		w.c.tally.count(cl.Queue, e.now, runErr != nil)
	}
	switch {
	case outcome == "cancelled":
	case e.snoozed && e.throttled:
		w.c.met.Throttled(ctx, job, e.adapted.To < e.adapted.From, e.adapted.RateTo < e.adapted.RateFrom)
	case e.snoozed:
		w.c.met.Snoozed(ctx, job)
	case e.startedLate:
	case !e.shutdown:
		w.c.met.Finished(ctx, job, res.State)
	}
	if n := res.Promoted.Jobs; n > 0 {
		log.Debug("promoted blocked jobs into the released slot", "count", n, "promoted_job_ids", res.Promoted.JobIDs)
		w.c.met.PromotedBlocked(ctx, cl.Limit.Key, n)
	}
	// The slot may have passed to a blocked job of any queue, in any
	// process; a job returned or retried at once is ready itself.
	w.c.ReadyAll(res.Woken(cl.Queue))
	return outcome
}

// runLog logs about one run with the run's fields, built only when the
// level is enabled: a logger made With them for every completion cost more
// CPU than the completion's share of its batch statement.
type runLog struct {
	ctx   context.Context
	log   *slog.Logger
	claim *driver.Claim
}

func (l runLog) at(level slog.Level, msg string, args ...any) {
	if !l.log.Enabled(l.ctx, level) {
		return
	}
	cl := l.claim
	l.log.Log(l.ctx, level, msg, append([]any{"job_id", cl.ID, "kind", cl.Kind, "queue", cl.Queue, driver.LogKey(cl.Limit.Key),
		"attempt", cl.Attempt + 1}, args...)...)
}

func (l runLog) Debug(msg string, args ...any) { l.at(slog.LevelDebug, msg, args...) }

func (l runLog) Info(msg string, args ...any) { l.at(slog.LevelInfo, msg, args...) }

func (l runLog) Warn(msg string, args ...any) { l.at(slog.LevelWarn, msg, args...) }

func (l runLog) Error(msg string, args ...any) { l.at(slog.LevelError, msg, args...) }

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
