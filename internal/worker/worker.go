package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/tracing"
)

// errShutdown is the cancellation cause of jobs still running when the
// shutdown timeout ends: they go back to ready, their attempt uncounted.
var errShutdown = errors.New("bq: worker shutting down")

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
