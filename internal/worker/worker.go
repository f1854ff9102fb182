package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/metrics"
	"github.com/bqueue/bq/internal/tracing"
)

// errShutdown is the cancellation cause of jobs still running when the
// shutdown timeout ends: they go back to ready, their attempt uncounted.
var errShutdown = errors.New("bq: worker shutting down")

type metaKey struct{}

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
	// recordCtx bounds the recording of outcomes: it ends only when a
	// stop gives up on the database.
	recordCtx context.Context

	runs    chan run // claimed jobs for the runners
	mu      sync.Mutex
	running map[int64]*execution // every claim this worker holds
	ending  int                  // of them, ended runs whose completion waits
	wg      sync.WaitGroup
}

func newQueueWorker(c *Runtime, proc *process, cp *completer, queue string, slots int, jobCtx, recordCtx context.Context) *queueWorker {
	return &queueWorker{c: c, proc: proc, completer: cp, queue: queue, slots: slots, jobCtx: jobCtx, recordCtx: recordCtx,
		wake: make(chan struct{}, 1), done: make(chan struct{}, 1), running: map[int64]*execution{},
		runs: make(chan run, slots)}
}

// busy is the number of slots taken: by runs whose code is executing, and
// by ended runs waiting for their completion's batch beyond as many again
// as the slots, so a worker never holds more than twice its slots in
// claims while the completer catches up.
func (w *queueWorker) busy() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return max(len(w.running)-w.ending, len(w.running)-w.slots)
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
	defer close(w.runs)
	poll := time.NewTimer(0)
	defer poll.Stop()
	drained := false
	for {
		if free := w.slots - w.busy(); free > 0 && !drained && w.proc.canClaim() {
			// Until the runs hold leases, the claims are in flight: the
			// process's claim check must not take them for orphans.
			w.proc.claiming.RLock()
			// Not cut by a stop mid-statement: a claim the database
			// committed while its caller gave up would wait to be reaped.
			claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
			claims, got, err := w.claim(claimCtx, free)
			cancel()
			switch {
			case err != nil:
				// No claim of a failed claim is run (lifecycle.Claim);
				// one whose COMMIT landed unseen is an orphan, which the
				// process's next claim check returns to ready.
				claims = nil
				w.proc.suspectOrphans()
				if ctx.Err() == nil {
					w.c.dbFailed("claim jobs of queue "+w.queue, err)
				}
				drained = true
			case err == nil:
				w.c.dbOK("claim jobs")
				drained = got < free
			}
			for _, cl := range claims {
				w.claimed(ctx, cl)
				w.start(cl)
			}
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
		w.c.log.Debug("job claimed", "job_id", cl.ID, "kind", cl.Kind, "queue", cl.Queue, "key", cl.Limit.Key,
			"attempt", cl.Attempt+1, "process_id", w.proc.ID())
	}
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

// ended frees the slot of a run whose code returned nil: its completion
// goes in the completer's next batch while the runner takes the next job.
func (w *queueWorker) ended(l *lease) {
	w.mu.Lock()
	if e := w.running[l.claim.ID]; e != nil && !e.ended {
		e.ended = true
		w.ending++
	}
	w.mu.Unlock()
	w.freed()
}

// finished ends a run once its outcome is recorded: the claim is no
// longer this worker's.
func (w *queueWorker) finished(r run) {
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

// abandon returns the claims of jobs that did not stop when cancelled to
// ready. Their runs go on in the background; when they end, their claim's
// fence no longer matches and they record nothing.
func (w *queueWorker) abandon(ctx context.Context) {
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
			_, err := lifecycle.Return(ctx, ex, cl, w.c.cfg.Now())
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
		MaxAttempts: cl.MaxAttempts, Key: cl.Limit.Key}
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
		runCtx := WithMeta(ctx, meta)
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
	if runErr == nil {
		w.ended(l) // record hands the completion on and returns
	}
	w.record(ctx, l, meta, def, runErr, time.Since(start), func(outcome string) {
		w.c.tr.EndProcess(span, outcome, runErr)
		w.finished(r)
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
		err := fn()
		if err == nil {
			c.dbOK(what)
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
