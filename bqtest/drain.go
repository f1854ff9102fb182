package bqtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/worker"
)

// DefaultDrainTimeout is how long Drain waits for the work to end.
const DefaultDrainTimeout = 10 * time.Second

// DrainOption tunes Drain.
type DrainOption func(*drainOptions)

type drainOptions struct{ timeout time.Duration }

// DrainTimeout bounds how long Drain waits. Default DefaultDrainTimeout.
func DrainTimeout(d time.Duration) DrainOption { return func(o *drainOptions) { o.timeout = d } }

// drainPoll is how often Drain looks whether work is left.
const drainPoll = 20 * time.Millisecond

// Drain runs client's workers and dispatcher (client.Run) until no job
// is ready, running or blocked and no scheduled job is due, then stops
// them. Jobs enqueued by jobs, and blocked jobs promoted as their keys
// free, run too. Scheduled jobs due later (bq.In, a retry's backoff) are
// left as they are; Drain logs how many. If work is still left when the
// timeout ends, Drain fails the test with the counts by state and the
// first jobs left.
//
// The client must not be running already. Its Config decides the queues
// worked (by default those of the jobs defined in the test binary) and
// how often its dispatcher looks for due jobs (NewClient's: every
// 50 ms).
func Drain(ctx context.Context, tb testing.TB, client *bq.Client, opts ...DrainOption) {
	tb.Helper()
	o := drainOptions{timeout: DefaultDrainTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if client == nil {
		tb.Fatalf("bqtest.Drain: the client is nil: pass the *bq.Client whose jobs to run")
	}
	if o.timeout <= 0 {
		tb.Fatalf("bqtest.Drain: DrainTimeout(%s): use a positive duration", o.timeout)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- client.Run(runCtx) }()
	// stopRun ends Run and returns its error; running jobs get the
	// client's ShutdownTimeout.
	stopRun := func() error {
		stop()
		return <-ran
	}

	deadline := time.NewTimer(o.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-ran:
			tb.Fatalf("bqtest.Drain: the client stopped before the work ended: %v", cmpErr(err, ctx.Err()))
		case <-deadline.C:
			left := leftOver(ctx, client)
			if err := stopRun(); err != nil {
				tb.Errorf("bqtest.Drain: stop the client: %v", err)
			}
			tb.Fatalf("bqtest.Drain: work left after %s:\n%s", o.timeout, left)
		case <-tick.C:
			idle, later, waiting, err := idle(ctx, client)
			if err != nil {
				_ = stopRun()
				tb.Fatalf("bqtest.Drain: %v", err)
			}
			if !idle {
				continue
			}
			if err := stopRun(); err != nil {
				tb.Fatalf("bqtest.Drain: stop the client: %v", err)
			}
			if later > 0 {
				tb.Logf("bqtest.Drain: left %s due later", plural(later, "scheduled job"))
			}
			if waiting > 0 {
				tb.Logf("bqtest.Drain: left %s (DependsOn) whose dependencies have not ended", plural(waiting, "waiting job"))
			}
			return
		}
	}
}

// cmpErr is why Run returned early: its error, or ctx's end.
func cmpErr(err, ctxErr error) error {
	if err == nil {
		return errors.Join(errors.New("client.Run returned nil"), ctxErr)
	}
	return err
}

// idle reports whether no job is ready, running or blocked and no
// scheduled job is due by the client's clock, and how many scheduled
// jobs are due later.
func idle(ctx context.Context, client *bq.Client) (_ bool, later int, waiting int, _ error) {
	// Due jobs first: one promoted and claimed after this look is counted
	// ready or running by the next; in the other order it could slip
	// between the two.
	rt := worker.For(client)
	if rt == nil {
		return false, 0, 0, errors.New("the client is closed")
	}
	due, err := rt.DueScheduled(ctx)
	if err != nil {
		return false, 0, 0, fmt.Errorf("look for due scheduled jobs: %w", err)
	}
	if due {
		return false, 0, 0, nil // the dispatcher promotes it at its next pass
	}
	stats, err := client.QueueStats(ctx) // one statement: one snapshot of every state
	if err != nil {
		return false, 0, 0, fmt.Errorf("count jobs: %w", err)
	}
	for _, q := range stats {
		if q.Ready+q.Running+q.Blocked > 0 {
			return false, 0, 0, nil
		}
		later += q.Scheduled
		// A job waiting for others (DependsOn) with nothing running
		// waits for a job due later, or for one that never ends.
		waiting += q.Waiting
	}
	return true, later, waiting, nil
}

// leftOver describes the live jobs: counts by state and queue, and the
// first few.
func leftOver(ctx context.Context, client *bq.Client) string {
	stats, err := client.QueueStats(ctx)
	if err != nil {
		return fmt.Sprintf("  (count jobs: %v)", err)
	}
	var lines []string
	for _, q := range stats {
		paused := ""
		if q.Paused {
			paused = " (paused)"
		}
		line := fmt.Sprintf("queue %q%s: ready %d, running %d, blocked %d, scheduled %d, failed %d",
			q.Queue, paused, q.Ready, q.Running, q.Blocked, q.Scheduled, q.Failed)
		if q.Waiting > 0 {
			line += fmt.Sprintf(", waiting for other jobs %d", q.Waiting)
		}
		lines = append(lines, line)
	}
	page, err := client.ListJobs(ctx, bq.JobFilter{Limit: 5,
		States: []bq.JobState{bq.StateReady, bq.StateRunning, bq.StateBlocked, bq.StateScheduled, bq.StateWaiting}})
	if err != nil {
		lines = append(lines, fmt.Sprintf("(list jobs: %v)", err))
	}
	for _, j := range page.Jobs {
		lines = append(lines, describe(j))
	}
	if page.Next != "" {
		lines = append(lines, "...")
	}
	return "  " + strings.Join(lines, "\n  ")
}
