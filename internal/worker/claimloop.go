package worker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/metrics"
)

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
	// capped: the last claim came back short because the queue's
	// MaxActive binds, not because it was drained: any run of this
	// worker that ends may free room, so it is claimed again then.
	drained, capped := false, false
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
			claims, got, err := w.claim(claimCtx, free, &capped)
			cancel()
			switch {
			case err != nil:
				// No claim of a failed claim is run (lifecycle.Claim);
				// one whose COMMIT landed unseen is a stray, which the
				// process's next claim check returns to ready.
				claims, capped = nil, false
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
				drained = got < free && !capped
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
			if capped {
				drained = false
			}
		}
	}
}

// claimTimeout bounds one claim statement.
const claimTimeout = 30 * time.Second

// claim claims up to n jobs; *capped says whether the queue's MaxActive
// left room for fewer.
func (w *queueWorker) claim(ctx context.Context, n int, capped *bool) (claims []*driver.Claim, got int, err error) {
	*capped = false
	claims, err = lifecycle.Claim(ctx, w.c.drv, driver.ClaimParams{
		Queue: w.queue, Max: n, ProcessID: w.proc.ID(), Now: w.c.cfg.Now(), Capped: capped,
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
		starts, promoted, err = lifecycle.StartRated(ctx, ex, claims, w.c.cfg.Now, w.c.startLag.read(w.c.cfg.Now()))
		return err
	})
	if err != nil {
		return nil, got, fmt.Errorf("start rate-limited jobs of queue %q: %w", w.queue, err)
	}
	w.c.ReadyAll(promoted.Queues)
	run := claims[:0]
	for i, cl := range claims {
		if starts[i].Run {
			cl.StartBy, cl.StartSlack, cl.RateSlot = starts[i].StartBy, starts[i].Slack, starts[i].Slot
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
