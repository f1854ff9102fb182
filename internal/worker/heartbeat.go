package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// heartbeat beats every HeartbeatInterval until ctx ends; a beat that
// failed is retried sooner, so beats land again as soon as the database
// is back. After every beat that lands, the process compares its runs
// with the claims the database holds (verifyClaims): a run whose claim
// vanished stops there. When the row is gone (a dispatcher declared this process dead
// and reaped its claims), its runs are no longer its own to finish: they
// are fenced, and the process registers again.
func (p *process) heartbeat(ctx context.Context) {
	cfg := p.c.cfg
	t := time.NewTimer(cfg.HeartbeatInterval)
	defer t.Stop()
	retry := retryFirst
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.resumed: // a pause seen, or a call failed: beat and verify now
		}
		send := cfg.Now()
		// Beats go out every interval from the last one's send, however
		// long it took to land: their spacing then only grows when the
		// database is slow to take writes, which is what beating_since
		// measures.
		var next time.Duration
		if p.beat(ctx, send) {
			// The renewal and the claim check go on beside the next
			// beats (afterBeats): on a slow link they would otherwise
			// space the beats out by their own round trips.
			select {
			case p.beaten <- struct{}{}:
			default:
			}
			if retry != retryFirst {
				// Beats land again after failing: the workers that
				// stopped claiming meanwhile claim now.
				p.c.wake("")
				retry = retryFirst
			}
			next = cfg.HeartbeatInterval - elapsed(cfg.Now(), send)
		} else {
			if ctx.Err() == nil {
				p.suspect()
			}
			next, retry = min(retry, cfg.HeartbeatInterval), min(2*retry, retryMax)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(max(next, 0))
	}
}

// How soon a failed beat is tried again, doubling up to retryMax (or the
// heartbeat interval, if shorter): soon enough that work resumes within
// about retryMax of the database coming back.
const (
	retryFirst = 25 * time.Millisecond
	retryMax   = 100 * time.Millisecond
)

// renewBelow is when a heartbeat renews a semaphore its claims hold: once
// less than half its Duration is left. Renewing at every beat would
// write every held key every HeartbeatInterval; at half, a key is written
// about twice per Duration and is never closer than half a Duration to
// expiring while its holder beats.
const renewBelow = 0.5

// afterBeats follows the beats that land, until ctx ends: it renews the
// semaphores the process's claims hold, and compares its runs with the
// claims the database holds (verifyClaims), so a run whose claim
// vanished (vanished in a failover, reaped, cancelled) stops within a beat.
// After calls failed (suspect), the check that succeeds lets the
// workers claim again. Beats that land while it works are followed once.
func (p *process) afterBeats(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.beaten:
		}
		id, send := p.ID(), *p.lastBeat.Load()
		renewCtx, cancel := context.WithTimeout(ctx, p.beatDeadline())
		err := driver.InTx(renewCtx, p.c.drv, func(tx driver.Executor) error {
			return tx.SemaphoreRenewHeld(renewCtx, id, send, renewBelow)
		})
		cancel()
		if err != nil && ctx.Err() == nil {
			p.c.log.Debug("heartbeat landed; renewing semaphores failed (next beat tries again)", "process_id", id, "error", err)
		}
		// Calls failed before this check began: the database may have
		// come back as another server, a replica promoted while this
		// process was cut off, that no longer has claims its runs hold. They are
		// fenced now, before the workers claim again.
		n := p.suspicions.Load()
		p.straysSuspected.Store(false)
		if p.verifyClaimsWithin(ctx) && n != p.cleared.Load() {
			p.cleared.Store(n)
			p.c.wake("")
		}
	}
}

// beatDeadline bounds a beat, and the claim check after it: half
// ProcessDeadAfter, at least two heartbeat intervals. Past it a beat
// could no longer save a lease that is lapsing anyway.
func (p *process) beatDeadline() time.Duration {
	return max(2*p.c.cfg.HeartbeatInterval, p.c.cfg.ProcessDeadAfter/2)
}

// beat sends one heartbeat stamped send and reports whether it landed.
func (p *process) beat(ctx context.Context, send time.Time) bool {
	cfg := p.c.cfg
	// Before the beat can extend any lease: a run whose lease lapsed
	// (this process was paused) is fenced, not revived.
	p.fenceExpired(send)
	p.mu.Lock()
	id := p.id
	since := p.beatingSince
	if elapsed(send, p.lastRowBeat) > cfg.HeartbeatInterval*3/2 {
		since = send // a beat was missed: the evidence starts again
	}
	p.mu.Unlock()
	// A beat may take up to beatDeadline to land: one that lands late
	// extends nothing past its send time, and cutting it short would
	// close its connection, so that on a slow link (round trips of a
	// heartbeat interval or more) every next beat would be slower still
	// and none would ever land.
	beatCtx, cancel := context.WithTimeout(ctx, p.beatDeadline())
	defer cancel()
	landed, err := p.c.drv.Exec().ProcessHeartbeat(beatCtx, driver.Beat{ProcessID: id, At: send, BeatingSince: since})
	switch {
	case landed:
		p.landed(send)
		p.mu.Lock()
		if p.id == id {
			p.lastRowBeat, p.beatingSince = send, since
		}
		p.mu.Unlock()
		p.c.dbOK("heartbeat", send)
		return true
	case err != nil:
		if ctx.Err() == nil {
			p.c.dbFailed("heartbeat", err)
		}
		return false
	default:
		p.c.log.Error("process was declared dead and its claims reaped; cancelling its runs and registering again", "process_id", id)
		p.fenceAll(fmt.Errorf("%w: process %d was declared dead and its claims reaped", p.c.cfg.LeaseLost, id))
		if err := p.registerRow(ctx); err != nil {
			p.c.log.Error("register again", "error", err)
			return false
		}
		return true
	}
}

// beacon sets the driver's beacon every HeartbeatInterval until ctx ends
// (SQLite: a file no database lock can hold up; see driver.Beaconer).
func (p *process) beacon(ctx context.Context, b driver.Beaconer) {
	t := time.NewTicker(p.c.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		send := p.c.cfg.Now()
		p.fenceExpired(send)
		switch err := b.Beacon(p.ID(), send); {
		case err == nil:
			p.landed(send)
		case errors.Is(err, driver.ErrNoBeacon):
			return
		default:
			p.c.log.Warn("process beacon failed", "process_id", p.ID(), "error", err)
		}
	}
}

// watchdog fences runs whose lease lapsed, every few milliseconds, so the
// contexts jobs derive from theirs are cancelled too; and when its own
// ticks show the process was paused, it has the heartbeat beat and verify
// the claims at once.
func (p *process) watchdog(ctx context.Context) {
	tick := min(max(p.c.cfg.HeartbeatInterval/4, 10*time.Millisecond), 100*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	last := p.c.cfg.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := p.c.cfg.Now()
		p.fenceExpired(now)
		if gap := elapsed(now, last); gap > tick+pauseNoticed {
			p.c.log.Info("process resumed after a pause; verifying its claims", "process_id", p.ID(), "pause", gap.Round(time.Millisecond))
			select {
			case p.resumed <- struct{}{}:
			default:
			}
		}
		last = now
	}
}

// pauseNoticed is how late a watchdog tick must be to count as a pause.
const pauseNoticed = 500 * time.Millisecond
