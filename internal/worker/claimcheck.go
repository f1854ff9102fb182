// The claim check: a process compares its runs with the claims the
// database holds, fencing runs whose claims are gone and returning claims
// no run holds (its strays), and cancels runs whose jobs were cancelled.

package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

// suspectStrays asks for a claim check at the next beat that lands: a
// claim failed, and its COMMIT may have landed though the caller saw an
// error, leaving claims no run holds.
func (p *process) suspectStrays() { p.straysSuspected.Store(true) }

// verifyClaimsWithin is verifyClaims bounded as a beat is: a partition
// that begins just after a beat landed must not hang the heartbeat on a
// connection whose peer is gone until TCP gives up (minutes).
func (p *process) verifyClaimsWithin(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, p.beatDeadline())
	defer cancel()
	return p.verifyClaims(ctx)
}

// verifyClaims checks this process's claims against its runs: a run whose
// claim is gone (taken while the process was paused, or lost in a
// failover) is fenced, and a claim no run holds (a claim whose commit
// landed though the caller saw an error) goes back to ready with its
// slot. It reports whether it could read the claims.
func (p *process) verifyClaims(ctx context.Context) bool {
	p.mu.Lock()
	id, seq := p.id, p.nextSeq
	p.mu.Unlock()
	// Hold claim loops off, so a claim in flight is not taken for an
	// stray; if one is in flight, strays wait for the next check.
	straysToo := p.claiming.TryLock()
	if straysToo {
		defer p.claiming.Unlock()
	} else {
		// A claim is in flight: strays are looked for at the next beat.
		defer p.suspectStrays()
	}
	held, err := p.c.drv.Exec().ClaimListOfProcess(ctx, id)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			p.c.log.Warn("verify claims", "process_id", id, "error", err)
		}
		return false
	}
	inDB := make(map[driver.Fenced]driver.OwnClaim, len(held))
	for _, h := range held {
		inDB[driver.Fenced{JobID: h.JobID, Fence: h.Fence}] = h
	}
	p.cancelMarked(held)
	running := map[driver.Fenced]bool{}
	for _, l := range p.activeLeases() {
		f := driver.Fenced{JobID: l.claim.ID, Fence: l.claim.Fence}
		running[f] = true
		// A run whose code returned has nothing left to stop: its claim
		// may be gone because its own outcome committed.
		if _, ok := inDB[f]; !ok && l.seq <= seq && !l.fenced.Load() && !l.returned.Load() {
			p.c.log.Warn("a run's claim is gone (taken while this process was paused or cut off, vanished in a failover, or returned by a stop that outwaited the run); cancelling the run", "job_id", l.claim.ID, "process_id", id)
			l.fence(fmt.Errorf("%w: its claim is gone (taken while this process was paused or cut off, vanished in a failover, or returned by a stop that outwaited the run)", p.c.cfg.LeaseLost))
		}
	}
	if !straysToo {
		return true
	}
	for f, h := range inDB {
		if running[f] {
			continue
		}
		p.returnStray(ctx, id, h)
	}
	return true
}

// returnStray returns to ready a claim of process id that no run holds,
// and logs what happened: the claim may have ended between the check's
// read of the claims and this transaction (a completion in flight
// committed meanwhile), and then nothing was returned.
func (p *process) returnStray(ctx context.Context, id int64, h driver.OwnClaim) {
	cl := &driver.Claim{Job: driver.Job{ID: h.JobID}, Fence: h.Fence, ClaimedAt: h.ClaimedAt}
	var res lifecycle.Result
	err := driver.InTx(ctx, p.c.drv, func(ex driver.Executor) error {
		info, ok, err := ex.JobGet(ctx, h.JobID)
		if err != nil || !ok {
			return err
		}
		cl.Job = info.Job
		res, err = lifecycle.Unclaim(ctx, ex, cl, p.c.cfg.Now())
		return err
	})
	switch {
	case err != nil:
		p.c.log.Warn("return a claim no run holds", "job_id", h.JobID, "process_id", id, "error", err)
	case !res.Matched:
		p.c.log.Debug("a claim no run held had ended before it was returned (its run's outcome committed meanwhile)",
			"job_id", h.JobID, "process_id", id)
	case res.State == driver.StateCancelled:
		p.c.log.Warn("cancelled a claim of this process that no run held: its cancel was requested", "job_id", h.JobID, "process_id", id)
	default:
		p.c.log.Warn("returned to ready a claim of this process that no run held", "job_id", h.JobID, "process_id", id)
	}
}

// watchCancels cancels the runs whose claims a cancel marked
// (Client.Cancel in any process) at once when woken, by cancelSignal
// through the driver's notifications (PostgreSQL's NOTIFY, MySQL's signal
// log) or, on SQLite, by any commit to the file. A missed wake-up is
// caught by the next heartbeat, whose claim check cancels the marked runs
// too (verifyClaims). Only a process with runs reads its claims.
func (p *process) watchCancels(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.cancels:
		}
		if len(p.activeLeases()) == 0 {
			continue
		}
		held, err := p.c.drv.Exec().ClaimListOfProcess(ctx, p.ID())
		if err != nil {
			if ctx.Err() == nil {
				p.c.log.Debug("look for cancelled runs (the next heartbeat tries again)", "process_id", p.ID(), "error", err)
			}
			continue
		}
		p.cancelMarked(held)
	}
}

// cancelMarked cancels, with cause ErrCancelled, each run whose claim in
// held carries a cancel mark. The claim, and its slot, stay the run's
// until the run ends: its code may still be executing.
func (p *process) cancelMarked(held []driver.OwnClaim) {
	marked := map[driver.Fenced]bool{}
	for _, h := range held {
		if h.CancelRequested {
			marked[driver.Fenced{JobID: h.JobID, Fence: h.Fence}] = true
		}
	}
	if len(marked) == 0 {
		return
	}
	for _, l := range p.activeLeases() {
		if marked[driver.Fenced{JobID: l.claim.ID, Fence: l.claim.Fence}] && l.cancelled.CompareAndSwap(false, true) {
			p.c.log.Info("job cancelled; cancelling its run", "job_id", l.claim.ID, "kind", l.claim.Kind, "process_id", p.ID())
			l.cancel(p.c.cfg.Cancelled)
		}
	}
}
