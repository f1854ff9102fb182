package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/humanize"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/metrics"
	"github.com/bqueue/bq/internal/tracing"
)

// errShutdown is the cancellation cause of jobs still running when the
// shutdown timeout ends: they go back to ready, their attempt uncounted.
var errShutdown = errors.New("bq: worker shutting down")

type metaKey struct{}

// outputKey holds a run's output writer (SetOutput).
type outputKey struct{}

type outputWriter struct {
	drv       driver.Driver
	id, fence int64
}

// ErrNotRunning refuses SetOutput outside a run, or from a run whose
// claim was taken (its process was paused or cut off past its lease).
var ErrNotRunning = errors.New("not a live run of a job")

// SetOutput stores raw as the output of the job ctx runs, while its
// claim holds.
func SetOutput(ctx context.Context, raw []byte) error {
	w, ok := ctx.Value(outputKey{}).(outputWriter)
	if !ok {
		return fmt.Errorf("%w: call it with the context bq passed the job's function", ErrNotRunning)
	}
	stored, err := w.drv.Exec().JobSetOutput(ctx, w.id, w.fence, raw)
	if err != nil {
		return err
	}
	if !stored {
		return fmt.Errorf("%w: job %d's claim was taken (fence %d); its output was not stored", ErrNotRunning, w.id, w.fence)
	}
	return nil
}

// RunDriver is the driver of the run ctx belongs to; false outside a run.
func RunDriver(ctx context.Context) (driver.Driver, bool) {
	w, ok := ctx.Value(outputKey{}).(outputWriter)
	return w.drv, ok
}

// WithMeta returns ctx carrying m, as a run's context does.
func WithMeta(ctx context.Context, m Meta) context.Context {
	return context.WithValue(ctx, metaKey{}, m)
}

// MetaFrom returns the Meta of the run whose context ctx is.
func MetaFrom(ctx context.Context) (Meta, bool) {
	m, ok := ctx.Value(metaKey{}).(Meta)
	return m, ok
}

// execution is one claimed job running in this process.
type execution struct {
	claim *driver.Claim
	lease *lease
	// ended: its code returned nil and its completion waits for the
	// completer's next batch. It no longer takes a slot.
	ended bool
}

// queueWorker runs one queue's jobs in up to slots goroutines.
type queueWorker struct {
	c         *Runtime
	proc      *process
	completer *completer
	queue     string
	slots     int
	wake      chan struct{}
	done      chan struct{}
	// jobCtx is the parent of every job's context; it outlives Run's
	// context so running jobs finish during a graceful stop.
	jobCtx context.Context
	// finishCtx bounds the recording of outcomes: it ends only when a
	// stop gives up on the database.
	finishCtx context.Context

	runs    chan run // claimed jobs for the runners
	mu      sync.Mutex
	running map[int64]*execution // every claim this worker holds
	ending  int                  // of them, ended runs whose completion waits
	// reserved slots are promised to claims in flight: the claim loop's
	// own, and hand-offs the completer makes in its batches.
	reserved int
	// closing: the claim loop ended; no slot is reserved any more.
	closing bool
	// sending guards the runners' channel between a hand-off's start of
	// its claims and the claim loop's close of it (closed: no more).
	sending sync.RWMutex
	closed  bool
	// empty: the last claim found fewer ready jobs than it asked for.
	// Only then does the completer hand jobs off: while the queue has
	// ready work, the claim loop fills every free slot beside the
	// completions, and a hand-off would only make those slots wait for
	// the completer's transaction.
	empty atomic.Bool
	wg    sync.WaitGroup
}

func newQueueWorker(c *Runtime, proc *process, cp *completer, queue string, slots int, jobCtx, recordCtx context.Context) *queueWorker {
	w := &queueWorker{c: c, proc: proc, completer: cp, queue: queue, slots: slots, jobCtx: jobCtx, finishCtx: recordCtx,
		wake: make(chan struct{}, 1), done: make(chan struct{}, 1), running: map[int64]*execution{},
		runs: make(chan run, slots)}
	return w
}

// busyLocked is the number of slots taken: by runs whose code is executing, and
// by ended runs waiting for their completion's batch beyond as many again
// as the slots, so a worker never holds more than twice its slots in
// claims while the completer catches up.
// Reserved slots are taken too. w.mu is held.
func (w *queueWorker) busyLocked() int {
	return max(len(w.running)-w.ending, len(w.running)-w.slots) + w.reserved
}

// reserve promises up to n free slots to claims about to be made, and
// returns how many it promised: none once the claim loop has ended.
// Every reservation ends with unreserve, after the claims it covered
// started.
func (w *queueWorker) reserve(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return 0
	}
	n = max(min(n, w.slots-w.busyLocked()), 0)
	w.reserved += n
	return n
}

// unreserve ends a reservation of n slots; wake tells the claim loop
// (the completer's reservations: slots a hand-off did not use are free
// for it to fill).
func (w *queueWorker) unreserve(n int, wake bool) {
	if n == 0 {
		return
	}
	w.mu.Lock()
	w.reserved -= n
	w.mu.Unlock()
	if wake {
		w.freed()
	}
}

// closeRuns ends the runners, once the claim loop has ended: no slot is
// reserved from then on, and a hand-off that committed meanwhile finds
// the channel closed and leaves its claims to the process's last claim
// check, which unclaims them (it never waits on a hand-off, whose batch
// may be retrying against a database that is down).
func (w *queueWorker) closeRuns() {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.sending.Lock()
	w.closed = true
	close(w.runs)
	w.sending.Unlock()
}

// reserveHandOff is reserve for the completer: none unless the queue
// looked empty at the last claim.
func (w *queueWorker) reserveHandOff(n int) int {
	if !w.empty.Load() {
		return 0
	}
	return w.reserve(n)
}

// handed starts the claims a hand-off made for this worker within the n
// slots reserved for it, then ends the reservation.
func (w *queueWorker) handed(ctx context.Context, claims []*driver.Claim, n int) {
	w.sending.RLock()
	if w.closed {
		// Stopping: no runner takes them. They are strays, which the
		// process's claim check returns to ready with their slots.
		w.sending.RUnlock()
		if len(claims) > 0 {
			w.proc.suspectStrays()
		}
		w.unreserve(n, false)
		return
	}
	if len(claims) > 0 && w.c.log.Enabled(ctx, slog.LevelDebug) {
		w.c.log.Debug("jobs handed off: claimed in the transaction that promoted them", "queue", w.queue, "count", len(claims))
	}
	for _, cl := range claims {
		w.claimed(ctx, cl)
		w.start(cl)
	}
	w.sending.RUnlock()
	w.unreserve(n, len(claims) < n)
}

// claimLoop claims jobs into free slots until ctx ends. A claim that comes
// back short means the queue is drained; the loop then waits for a wake-up
// (work made ready in this process) or the poll interval (work made ready
// elsewhere) rather than asking again after every finished job.
func (w *queueWorker) claimLoop(ctx context.Context) {
	for range w.slots {
		go w.runner()
	}
	// Runners end once the jobs handed to them are done.
	defer w.closeRuns()
	poll := time.NewTimer(0)
	defer poll.Stop()
	drained := false
	for {
		if free := w.reserve(w.slots); free > 0 && (drained || !w.proc.canClaim()) {
			w.unreserve(free, false)
		} else if free > 0 {
			// Until the runs hold leases, the claims are in flight: the
			// process's claim check must not take them for strays.
			w.proc.claiming.RLock()
			// Not cut by a stop mid-statement: a claim the database
			// committed while its caller gave up would wait to be reaped.
			claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
			began := w.c.cfg.Now()
			claims, got, err := w.claim(claimCtx, free)
			cancel()
			switch {
			case err != nil:
				// No claim of a failed claim is run (lifecycle.Claim);
				// one whose COMMIT landed unseen is a stray, which the
				// process's next claim check returns to ready.
				claims = nil
				w.proc.suspectStrays()
				if ctx.Err() == nil {
					w.c.dbFailed("claim jobs of queue "+w.queue, err)
				}
				drained = true
			case err == nil:
				if got == 0 {
					began = time.Time{} // maybe nothing written
				}
				w.c.dbOK("claim jobs", began)
				drained = got < free
				w.empty.Store(drained)
			}
			for _, cl := range claims {
				w.claimed(ctx, cl)
				w.start(cl)
			}
			w.unreserve(free, false)
			w.proc.claiming.RUnlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
			drained = false
		case <-poll.C:
			drained = false
			poll.Reset(w.c.cfg.PollInterval)
		case <-w.done:
		}
	}
}

// claimTimeout bounds one claim statement.
const claimTimeout = 30 * time.Second

func (w *queueWorker) claim(ctx context.Context, n int) (claims []*driver.Claim, got int, err error) {
	claims, err = lifecycle.Claim(ctx, w.c.drv, driver.ClaimParams{
		Queue: w.queue, Max: n, ProcessID: w.proc.ID(), Now: w.c.cfg.Now(),
	})
	got = len(claims)
	if err != nil || !slices.ContainsFunc(claims, func(c *driver.Claim) bool { return c.Rate.Key != "" }) {
		return claims, got, err
	}
	// Rated jobs start only on a slot of their key's ring; the others go
	// back to its line unrun.
	var starts []lifecycle.RateStart
	var promoted driver.Promotion
	err = driver.InTx(ctx, w.c.drv, func(ex driver.Executor) (err error) {
		starts, promoted, err = lifecycle.StartRated(ctx, ex, claims, w.c.cfg.Now)
		return err
	})
	if err != nil {
		return nil, got, fmt.Errorf("start rate-limited jobs of queue %q: %w", w.queue, err)
	}
	w.c.ReadyAll(promoted.Queues)
	run := claims[:0]
	for i, cl := range claims {
		if starts[i].Run {
			cl.StartBy, cl.RateSlot = starts[i].StartBy, starts[i].Slot
			run = append(run, cl)
		}
	}
	if len(run) < got {
		w.c.rateWaits()
	}
	return run, got, nil
}

// claimed logs a claim and records how long a first run waited for it,
// from the job's due time.
func (w *queueWorker) claimed(ctx context.Context, cl *driver.Claim) {
	if w.c.log.Enabled(ctx, slog.LevelDebug) { // the arguments alone cost a claim more than its share of the statement
		runLog{ctx: ctx, log: w.c.log, claim: cl}.Debug("job claimed", "process_id", w.proc.ID())
	}
	w.c.met.Claimed(ctx, metrics.JobOf(&cl.Job))
	if cl.Attempt == 0 {
		due := cl.ScheduledAt
		if cl.CreatedAt.After(due) {
			due = cl.CreatedAt
		}
		w.c.met.Waited(ctx, metrics.JobOf(&cl.Job), max(cl.ClaimedAt.Sub(due), 0).Seconds())
	}
}

// start hands a claimed job to a runner. There are never more running
// jobs than slots, so the hand-off never waits.
func (w *queueWorker) start(cl *driver.Claim) {
	ctx, cancel := context.WithCancelCause(w.jobCtx)
	l := w.proc.newLease(cl, cancel)
	w.mu.Lock()
	w.running[cl.ID] = &execution{claim: cl, lease: l}
	w.mu.Unlock()
	w.wg.Add(1)
	w.runs <- run{ctx: ctx, cancel: cancel, lease: l}
}

// run is a claimed job handed to a runner.
type run struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	lease  *lease
}

// runner executes jobs one after another. A queue keeps one per slot for
// its whole run, so a job starts on a goroutine whose stack has already
// grown rather than on a fresh one.
func (w *queueWorker) runner() {
	for r := range w.runs {
		w.execute(r)
	}
}

// codeReturned frees the slot of a run whose code returned nil: its completion
// goes in the completer's next batch while the runner takes the next job.
func (w *queueWorker) codeReturned(l *lease) {
	w.mu.Lock()
	if e := w.running[l.claim.ID]; e != nil && !e.ended {
		e.ended = true
		w.ending++
	}
	w.mu.Unlock()
	w.freed()
}

// runOver ends a run once its outcome is recorded: the claim is no
// longer this worker's.
func (w *queueWorker) runOver(r run) {
	r.cancel(nil)
	w.proc.dropLease(r.lease)
	w.mu.Lock()
	if e := w.running[r.lease.claim.ID]; e != nil && e.ended {
		w.ending--
	}
	delete(w.running, r.lease.claim.ID)
	w.mu.Unlock()
	w.wg.Done()
	w.freed()
}

// freed tells the claim loop a slot may be free.
func (w *queueWorker) freed() {
	select {
	case w.done <- struct{}{}:
	default:
	}
}

// unclaimStuck returns the claims of jobs that did not stop when cancelled to
// ready. Their runs go on in the background; when they end, their claim's
// fence no longer matches and they record nothing.
func (w *queueWorker) unclaimStuck(ctx context.Context) {
	w.mu.Lock()
	claims := make([]*driver.Claim, 0, len(w.running))
	for _, e := range w.running {
		if !e.ended { // its completion is in the completer's hands
			claims = append(claims, e.claim)
		}
	}
	w.mu.Unlock()
	for _, cl := range claims {
		err := driver.InTx(ctx, w.c.drv, func(ex driver.Executor) error {
			_, err := lifecycle.Unclaim(ctx, ex, cl, w.c.cfg.Now())
			return err
		})
		if err != nil {
			w.c.log.Error("return unfinished job to ready", "job_id", cl.ID, "kind", cl.Kind, "queue", cl.Queue, "error", err)
		} else {
			w.c.log.Warn("job did not stop when cancelled; returned it to ready", "job_id", cl.ID, "kind", cl.Kind, "queue", cl.Queue)
		}
	}
}

// execute runs one claimed job and records how it ended. The job's
// context is a runContext: every check of it checks the run's lease.
func (w *queueWorker) execute(r run) {
	ctx, l := r.ctx, r.lease
	cl := l.claim
	meta := Meta{ID: cl.ID, Kind: cl.Kind, Queue: cl.Queue, Attempt: cl.Attempt + 1,
		MaxAttempts: cl.MaxAttempts, Key: cl.Limit.Key, RateKey: cl.Rate.Key, Token: cl.Fence}
	for _, l := range cl.Keys() {
		meta.Keys = append(meta.Keys, l.Key)
	}
	if md, tags, err := DecodeLabels(cl.Metadata, cl.Tags); err != nil {
		// bq wrote them; the job still runs, without them.
		w.c.log.Warn("job metadata unreadable", "job_id", cl.ID, "kind", cl.Kind, "error", err)
	} else {
		meta.Metadata, meta.Tags = md, tags
	}
	ctx, span := w.c.tr.Process(ctx, tracing.Job{Queue: cl.Queue, Kind: cl.Kind, Key: cl.Limit.Key}, cl.ID, meta.Attempt, meta.Metadata)
	def := w.c.cfg.Jobs.Lookup(cl.Kind)
	start := time.Now()
	var runErr error
	if def == nil {
		runErr = Permanent(fmt.Errorf("unknown job kind %q: no bq.Define in this worker's binary has that name (deploy a worker that defines it, then retry the job)", cl.Kind))
	} else {
		runCtx := context.WithValue(WithMeta(ctx, meta), outputKey{}, outputWriter{drv: w.c.drv, id: cl.ID, fence: cl.Fence})
		if t := def.Timeout(); t > 0 {
			var cancel context.CancelFunc
			runCtx, cancel = context.WithTimeout(runCtx, t)
			defer cancel()
		}
		rc := runContext{Context: runCtx, lease: l}
		// A claim can wait for a runner (a queue holds up to twice its
		// slots in claims): if the process was frozen meanwhile past the
		// lease, the claim may be taken and the job run elsewhere
		// already, so runThrough checks the gate before any middleware
		// begins, and again just before the job.
		runErr = w.c.cfg.Jobs.Run(gated(rc), meta, def, cl.Args)
	}
	l.returned.Store(true)
	if runErr == nil {
		w.codeReturned(l) // record hands the completion on and returns
	}
	w.finish(ctx, l, meta, def, runErr, time.Since(start), func(outcome string) {
		w.c.tr.EndProcess(span, outcome, runErr)
		w.runOver(r)
	})
}

// retryDB runs fn until it succeeds, backing off while the database is
// unreachable or locked, until ctx ends. An outcome is never given up on
// while the process lives: silence its process shares with the database
// is no ground to reap its claim, so an outcome dropped here would strand
// the claim and its slot.
func (c *Runtime) retryDB(ctx context.Context, what string, fn func() error) error {
	return c.retryDBWhile(ctx, what, func(error) bool { return true }, fn)
}

// retryDBWhile is retryDB for the errors worth trying again for; any
// other error returns at once.
func (c *Runtime) retryDBWhile(ctx context.Context, what string, worth func(error) bool, fn func() error) error {
	backoff := 50 * time.Millisecond
	for {
		began := c.cfg.Now()
		err := fn()
		if err == nil {
			c.dbOK(what, began)
			return nil
		}
		if ctx.Err() != nil || !worth(err) {
			return err
		}
		c.dbFailed(what, err)
		wait := backoff/2 + rand.N(backoff)
		select {
		case <-time.After(wait):
		case <-c.outage.recovered():
			// Another call got through (heartbeats retry every 100 ms):
			// try again now rather than at the end of the backoff.
			backoff = 50 * time.Millisecond
			continue
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

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
		log.Warn("rate-limited job did not begin within its start slack of the claim (the process stalled); back in its rate line, not run",
			"rate_key", cl.Rate.Key, "start_by", cl.StartBy)
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
func (l runLog) Info(msg string, args ...any)  { l.at(slog.LevelInfo, msg, args...) }
func (l runLog) Warn(msg string, args ...any)  { l.at(slog.LevelWarn, msg, args...) }
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

// ErrStartedLate ends a rated run that did not begin by its claim's
// StartBy: it is not run, and goes back to its rate key's line
// (lifecycle.StartedLate).
var ErrStartedLate = errors.New("bq: the rate-limited run did not begin within its start slack of its claim")

// beginGateKey holds the runContext of a claimed run, which must pass
// the begin gate before its middleware and again just before its job's
// own function (a middleware, or a freeze of the process while it ran,
// can take any time): the run's lease must still hold, or its claim may
// be taken and the job run elsewhere already; and a rated run must begin
// by its claim's StartBy, so no start the job sees comes later than the
// one its key's ring counts.
type beginGateKey struct{}

// gated is rc with its begin gate attached.
func gated(rc runContext) context.Context {
	return context.WithValue(rc, beginGateKey{}, rc)
}

// MayBegin reports why the run of ctx must not begin now, or nil. A
// context without a gate (bqtest.Work) always may.
func MayBegin(ctx context.Context) error {
	rc, ok := ctx.Value(beginGateKey{}).(runContext)
	if !ok {
		return nil
	}
	l := rc.lease
	if l.check(); l.fenced.Load() {
		if cause := context.Cause(rc); cause != nil {
			return cause
		}
		return l.proc.c.cfg.LeaseLost // fenced before the cause was set: never, as fence sets fenced after the cancel
	}
	if by := l.claim.StartBy; !by.IsZero() && l.proc.c.cfg.Now().After(by) {
		return ErrStartedLate
	}
	return nil
}

// rateWaits tells this process's dispatcher, if it runs one, that a job
// went to a rate line, so it looks at the lines now rather than at its
// next poll.
func (c *Runtime) rateWaits() {
	select {
	case c.rateWake <- struct{}{}:
	default:
	}
}

// GatedRun is the context of a run behind its begin gate, for tests of
// code that calls MayBegin: its process's last beat landed at now(), its
// lease lapses after bound of silence, and startBy, when not zero, is a
// rated claim's start slack. cancel ends it.
func GatedRun(parent context.Context, now func() time.Time, bound time.Duration, startBy time.Time, leaseLost error) (ctx context.Context, cancel context.CancelCauseFunc) {
	c := &Runtime{cfg: Config{Now: now, LeaseLost: leaseLost}, log: slog.New(slog.DiscardHandler)}
	p := &process{c: c}
	beat := now()
	p.lastBeat.Store(&beat)
	base, cancel := context.WithCancelCause(parent)
	l := &lease{proc: p, claim: &driver.Claim{StartBy: startBy}, bound: bound, cancel: cancel}
	return gated(runContext{Context: base, lease: l}), cancel
}
