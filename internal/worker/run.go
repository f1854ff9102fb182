package worker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/bqueue/bq/internal/dispatcher"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/metrics"
)

// CancelSignal is the wake-up that tells processes to look for cancelled
// runs: sent through the driver's notifications like a queue name, which
// can never be spelled with '!' (see queueRule), so no queue's workers
// take it for theirs.
const CancelSignal = "!cancel"

// RunOptions says what a Run runs.
type RunOptions struct {
	// Work runs workers for Queues (queue -> slots); Dispatch runs the
	// dispatcher and Periodic, the periodic scheduler, when not nil.
	Work     bool
	Queues   map[string]int
	Dispatch bool
	Periodic func(ctx context.Context)
	// Inbox, when not nil, decides a batch of the inbox's pending rows
	// of this process's job kinds; more says a full batch was decided
	// (see inboxLoop).
	Inbox func(ctx context.Context) (more bool, err error)
}

// Run works the queues, the dispatcher and the periodic scheduler o
// names until ctx ends, then stops gracefully: no new claims, running
// jobs get ShutdownTimeout to finish, and those still running are
// cancelled and go back to ready with their slots (bq.Client.Run).
func (c *Runtime) Run(ctx context.Context, o RunOptions) error {
	work, dispatch, queues := o.Work, o.Dispatch, o.Queues
	if !work {
		queues = map[string]int{}
	}
	// Registered, beating and claiming by the database's clock from the
	// first statement on.
	skewed := c.syncClock(ctx, false)
	kind := map[[2]bool]string{{true, true}: "worker+dispatcher", {true, false}: "worker", {false, true}: "dispatcher"}[[2]bool{work, dispatch}]
	proc, err := c.register(ctx, kind, slices.Collect(maps.Keys(queues)))
	if err != nil && ctx.Err() != nil {
		// Stopped while registration waited on a busy database: nothing
		// was claimed, so it is a clean stop.
		return nil
	}
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	// Registration and the final clean-up outlive ctx.
	bg := context.WithoutCancel(ctx)
	defer proc.deregister(bg)
	c.active.Store(proc)
	defer c.active.Store(nil)

	jobCtx, stopJobs := context.WithCancelCause(bg)
	defer stopJobs(errShutdown)
	finishCtx, stopFinishing := context.WithCancel(bg)
	defer stopFinishing()
	cp := startCompleter(c, finishCtx)
	workers := make([]*queueWorker, 0, len(queues))
	for q, slots := range queues {
		workers = append(workers, newQueueWorker(c, proc, cp, q, slots, jobCtx, finishCtx))
	}
	cp.handOffTo(proc, workers)

	beatCtx, stopBeat := context.WithCancel(bg)
	var services sync.WaitGroup
	services.Go(func() { proc.heartbeat(beatCtx) })
	services.Go(func() { proc.afterBeats(beatCtx) })
	services.Go(func() { proc.watchdog(beatCtx) })
	services.Go(func() { c.watchClock(beatCtx, skewed) })
	if b, ok := c.drv.(driver.Beaconer); ok {
		services.Go(func() { proc.beacon(beatCtx, b) })
	}
	if work {
		// Woken by CancelSignal as a queue's workers are by its name.
		c.addWaker(CancelSignal, proc.cancels)
		defer c.removeWaker(CancelSignal, proc.cancels)
		services.Go(func() { proc.watchCancels(beatCtx) })
		services.Go(func() { c.listen(beatCtx) })
		services.Go(func() { c.flushHistory(beatCtx) })
	}
	if o.Inbox != nil {
		if !work {
			services.Go(func() { c.listen(beatCtx) })
		}
		services.Go(func() { c.inboxLoop(ctx, o.Inbox) })
	}
	if dispatch {
		d := c.dispatcher()
		services.Go(func() { _ = d.Run(ctx) })
		if o.Periodic != nil {
			services.Go(func() { o.Periodic(ctx) })
		}
	}
	var loops sync.WaitGroup
	for _, w := range workers {
		c.addWaker(w.queue, w.wake)
		loops.Go(func() { w.claimLoop(ctx) })
	}
	c.log.Info("bq started", "process_id", proc.ID(), "kind", kind, "queues", queues)

	<-ctx.Done()
	loops.Wait()
	for _, w := range workers {
		c.removeWaker(w.queue, w.wake)
	}
	c.drain(bg, workers, stopJobs)
	// Outcomes still unrecorded now wait on a database that is gone; the
	// claims they hold are reaped once this process is declared dead.
	stopFinishing()
	cp.stop()
	// A claim that committed as the stop began, that no runner took, goes
	// back to ready now rather than when reaped (verifyClaims returns
	// claims no run holds).
	proc.verifyClaims(bg)
	stopBeat()
	services.Wait()
	c.log.Info("bq stopped", "process_id", proc.ID())
	return nil
}

// drain waits for running jobs up to ShutdownTimeout, then cancels them
// and gives them a moment to return; claims of jobs that still have not
// returned go back to ready.
func (c *Runtime) drain(ctx context.Context, workers []*queueWorker, stopJobs context.CancelCauseFunc) {
	all := func() <-chan struct{} {
		ch := make(chan struct{})
		go func() {
			for _, w := range workers {
				w.wg.Wait()
			}
			close(ch)
		}()
		return ch
	}()
	select {
	case <-all:
		return
	case <-time.After(c.cfg.ShutdownTimeout):
	}
	c.log.Warn("shutdown timeout reached; cancelling running jobs")
	stopJobs(errShutdown)
	select {
	case <-all:
		return
	case <-time.After(min(c.cfg.ShutdownTimeout, 5*time.Second)):
	}
	for _, w := range workers {
		w.unclaimStuck(ctx)
	}
}

// dispatcherHooks count what the dispatcher does.
func (c *Runtime) dispatcherHooks() dispatcher.Hooks {
	return dispatcher.Hooks{
		Admitted: func(ctx context.Context, j *driver.Job, state driver.JobState) {
			if state == driver.StateReady {
				c.met.PromotedScheduled(ctx, metrics.JobOf(j))
			}
			c.met.Admitted(ctx, metrics.JobOf(j), state)
		},
		Promoted: c.met.PromotedBlocked,
		Reaped: func(ctx context.Context, cl *driver.Claim, state driver.JobState) {
			c.met.Reap(ctx, metrics.JobOf(&cl.Job), state)
		},
	}
}

// dispatcher is the client's dispatcher: the maintenance passes of a
// process that dispatches.
func (c *Runtime) dispatcher() *dispatcher.Dispatcher {
	return dispatcher.New(c.drv, dispatcher.Config{
		Interval: c.cfg.DispatchInterval, ProcessDeadAfter: c.cfg.ProcessDeadAfter,
		Retention: c.cfg.Retention, OnReady: c.Ready, Now: c.cfg.Now, Logger: c.log, RateWake: c.rateWake,
		Hooks:      c.dispatcherHooks(),
		PassFailed: func(err error) { c.passes.failed(c, "dispatcher", err) },
		PassOK:     c.passOK,
	})
}

// passOK records a dispatcher pass that succeeded. It may have written
// nothing (nothing due, no process silent, no key to promote): it shows
// the database takes writes by this process's newest write (see outage).
func (c *Runtime) passOK() { c.passes.ok(c, "dispatcher", c.lastWrite()) }

// DispatchOnce runs one dispatcher pass (every maintenance step once: due
// scheduled jobs, lost claims reaped, expired semaphores reclaimed,
// promotable lines promoted), as a process that dispatches does every
// DispatchInterval (bq verify --repair).
func (c *Runtime) DispatchOnce(ctx context.Context) error {
	return c.dispatcher().Pass(ctx)
}
