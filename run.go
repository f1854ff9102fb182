package bq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/bqueue/bq/dispatcher"
	"github.com/bqueue/bq/internal/driver"
)

// Run works this client's queues and runs the dispatcher and the
// periodic jobs of Config.Periodic until ctx ends, then stops
// gracefully: no new claims, running jobs get ShutdownTimeout to finish,
// and those still running are cancelled and go back to ready with their
// slots. It returns nil after a clean stop. Jobs' contexts carry ctx's
// values (not its cancellation: a stop lets them finish).
func (c *Client) Run(ctx context.Context) error { return c.run(ctx, true, true) }

// RunWorkers is Run without the dispatcher, for processes that leave
// maintenance to `bq dispatcher` or to other workers.
func (c *Client) RunWorkers(ctx context.Context) error { return c.run(ctx, true, false) }

// RunDispatcher runs only the dispatcher; it needs no job definitions.
// With Config.Periodic it also enqueues the periodic jobs, as Run does.
func (c *Client) RunDispatcher(ctx context.Context) error { return c.run(ctx, false, true) }

func (c *Client) queues() map[string]int {
	if len(c.cfg.Queues) > 0 {
		return c.cfg.Queues
	}
	qs := map[string]int{}
	for _, q := range registeredQueues() {
		qs[q] = 10
	}
	return qs
}

func (c *Client) run(ctx context.Context, work, dispatch bool) error {
	if work {
		// A kind defined twice is ambiguous: which code runs its jobs?
		if err := duplicateDefinitions(); err != nil {
			return fmt.Errorf("run workers: %w", err)
		}
	}
	if err := c.checkSchema(ctx); err != nil {
		return err
	}
	queues := map[string]int{}
	if work {
		queues = c.queues()
		if len(queues) == 0 {
			return errors.New("run workers: no queues to work: define jobs with bq.Define or set Config.Queues")
		}
	}
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

	jobCtx, stopJobs := context.WithCancelCause(bg)
	defer stopJobs(errShutdown)
	recordCtx, stopRecording := context.WithCancel(bg)
	defer stopRecording()
	cp := startCompleter(c, recordCtx)
	workers := make([]*queueWorker, 0, len(queues))
	for q, slots := range queues {
		workers = append(workers, newQueueWorker(c, proc, cp, q, slots, jobCtx, recordCtx))
	}

	beatCtx, stopBeat := context.WithCancel(bg)
	var services sync.WaitGroup
	services.Go(func() { proc.heartbeat(beatCtx) })
	services.Go(func() { proc.watchdog(beatCtx) })
	if b, ok := c.drv.(driver.Beaconer); ok {
		services.Go(func() { proc.beacon(beatCtx, b) })
	}
	if work {
		// Woken by cancelSignal as a queue's workers are by its name.
		c.addWaker(cancelSignal, proc.cancels)
		defer c.removeWaker(cancelSignal, proc.cancels)
		services.Go(func() { proc.watchCancels(beatCtx) })
		services.Go(func() { c.listen(beatCtx) })
		services.Go(func() { c.flushHistory(beatCtx) })
	}
	if dispatch {
		d := dispatcher.New(c.drv, dispatcher.Config{
			Interval: c.cfg.DispatchInterval, ProcessDeadAfter: c.cfg.ProcessDeadAfter,
			Retention: c.cfg.Retention, OnReady: c.ready, Now: c.cfg.Now, Logger: c.log, RateWake: c.rateWake,
			Hooks:      c.dispatcherHooks(),
			PassFailed: func(err error) { c.passes.failed(c, "dispatcher", err) },
			PassOK:     func() { c.passes.ok(c, "dispatcher") },
		})
		services.Go(func() { _ = d.Run(ctx) })
		if c.sched != nil {
			services.Go(func() { c.sched.run(ctx) })
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
	stopRecording()
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
func (c *Client) drain(ctx context.Context, workers []*queueWorker, stopJobs context.CancelCauseFunc) {
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
		w.abandon(ctx)
	}
}
