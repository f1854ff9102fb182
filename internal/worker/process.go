package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

// process is this Run's registration: its row in the processes table, the
// heartbeat that keeps it (and the semaphores its claims hold) alive, and
// the leases of the runs it holds.
//
// The rule that keeps a key's limit when this process pauses (a GC pause,
// a frozen VM, SIGSTOP): each run stops before any dispatcher may take its
// claim. A dispatcher takes a claim only after the process has been silent
// for its ProcessDeadAfter, or, for a keyed job, for the key's Duration
// (never less than three heartbeat intervals); each run's lease lapses one
// heartbeat interval before the lesser of the two. Leases are checked
// against the clock on every ctx.Err (runContext), by a watchdog, and
// before every heartbeat, so a beat sent after a pause extends no lease
// that had already lapsed.
type process struct {
	c      *Runtime
	kind   string
	queues []string

	// lastBeat is when the newest beat that landed (in the row, or the
	// driver's beacon) was sent.
	lastBeat atomic.Pointer[time.Time]
	resumed  chan struct{} // the watchdog saw a pause: beat and verify now
	// cancels wakes watchCancels: a cancel marked a claim somewhere
	// (cancelSignal), maybe one of this process's.
	cancels chan struct{}
	// claiming is held (shared) by claim loops from a claim until its
	// runs hold leases, so verifyClaims never takes a claim in flight for
	// a stray claim.
	claiming sync.RWMutex
	// straysSuspected: a claim failed, and its COMMIT may have landed
	// unseen; the next landed beat checks for claims no run holds.
	straysSuspected atomic.Bool
	// beaten wakes afterBeats: a beat landed.
	beaten chan struct{}
	// suspicions counts failed database calls (suspect), cleared the
	// count the last verified claims saw: a call failed, and the
	// database may come back as another server (a replica promoted)
	// that lost claims this process's runs hold. The next beat that
	// lands verifies the claims, and the process claims nothing until
	// then.
	suspicions, cleared atomic.Uint64

	mu      sync.Mutex
	id      int64
	leases  map[*lease]struct{}
	nextSeq uint64
	// Of the row's heartbeats: when the last one landed, and since when
	// they have landed without a gap (the row's beating_since).
	lastRowBeat, beatingSince time.Time
}

func (c *Runtime) register(ctx context.Context, kind string, queues []string) (*process, error) {
	slices.Sort(queues)
	p := &process{c: c, kind: kind, queues: queues, resumed: make(chan struct{}, 1), cancels: make(chan struct{}, 1),
		beaten: make(chan struct{}, 1), leases: map[*lease]struct{}{}}
	// A database busy or in a deadlock now (a SQLite file another
	// process's frozen writer holds) is no reason not to start: try
	// again. Other errors (not migrated, refused) fail at once.
	if err := c.retryDBWhile(ctx, "register process", c.drv.Retryable, func() error { return p.registerRow(ctx) }); err != nil {
		return nil, err
	}
	return p, nil
}

// registerRow inserts a fresh process row and starts its beats from now.
func (p *process) registerRow(ctx context.Context) error {
	c := p.c
	host, _ := os.Hostname()
	name := c.cfg.Name
	if name == "" {
		name = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	now := c.cfg.Now()
	id, err := c.drv.Exec().ProcessRegister(ctx, driver.Process{
		Kind: p.kind, Name: name, Hostname: host, PID: os.Getpid(), Queues: strings.Join(p.queues, ","),
		HeartbeatInterval: c.cfg.HeartbeatInterval, DeadAfter: c.cfg.ProcessDeadAfter, StartedAt: now,
	})
	if err != nil {
		return c.explainErr(ctx, err)
	}
	p.mu.Lock()
	p.id, p.lastRowBeat, p.beatingSince = id, now, now
	p.mu.Unlock()
	p.lastBeat.Store(&now)
	return nil
}

// ID is the current process id (it changes if the process re-registers).
func (p *process) ID() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.id
}

// silence is how long ago, at now, the newest landed beat was sent.
func (p *process) silence(now time.Time) time.Duration {
	return elapsed(now, *p.lastBeat.Load())
}

// minBound is the least bound any run can have: ProcessDeadAfter is at
// least three heartbeat intervals, and so is a key's reclaim silence.
func (p *process) minBound() time.Duration { return 2 * p.c.cfg.HeartbeatInterval }

// canClaim reports whether a new claim would get a lease: beats are
// landing, and the claims were verified since one last failed.
func (p *process) canClaim() bool {
	return p.cleared.Load() == p.suspicions.Load() && p.silence(p.c.cfg.Now()) < p.minBound()
}

// suspect records a failed call to the database: the process claims
// nothing until a beat lands and its claims are verified, which the
// heartbeat does at once.
func (p *process) suspect() {
	if p.suspicions.Add(1) == p.cleared.Load()+1 {
		select {
		case p.resumed <- struct{}{}:
		default:
		}
	}
}

// landed records a beat sent at `at` that landed.
func (p *process) landed(at time.Time) {
	for {
		old := p.lastBeat.Load()
		if !at.After(*old) || p.lastBeat.CompareAndSwap(old, &at) {
			return
		}
	}
}

// bound is the silence after which cl's run must stop: one heartbeat
// interval before the earliest moment a dispatcher may take its claim.
// Dispatchers wait for the longest of their own ProcessDeadAfter and this
// process's (stored in its row), and for a keyed job of the longest of the
// key's Duration, the job's own and three of this process's heartbeat
// intervals, so the bound holds whatever the others are configured with.
func (p *process) bound(cl *driver.Claim) time.Duration {
	cfg := p.c.cfg
	reclaim := cfg.ProcessDeadAfter
	for _, l := range cl.Keys() {
		reclaim = min(reclaim, max(l.Duration, 3*cfg.HeartbeatInterval))
	}
	return reclaim - cfg.HeartbeatInterval
}

// newLease gives a claimed job's run its lease; drop it when the run ends.
func (p *process) newLease(cl *driver.Claim, cancel context.CancelCauseFunc) *lease {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextSeq++
	l := &lease{proc: p, claim: cl, bound: p.bound(cl), seq: p.nextSeq, cancel: cancel}
	p.leases[l] = struct{}{}
	return l
}

func (p *process) dropLease(l *lease) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.leases, l)
}

func (p *process) activeLeases() []*lease {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*lease, 0, len(p.leases))
	for l := range p.leases {
		out = append(out, l)
	}
	return out
}

// fenceExpired fences every run whose lease has lapsed at `at`.
func (p *process) fenceExpired(at time.Time) {
	s := p.silence(at)
	if s <= p.minBound() {
		return // beats are landing: the watchdog's every tick ends here
	}
	for _, l := range p.activeLeases() {
		if s > l.bound && !l.fenced.Load() {
			p.c.log.Warn("no heartbeat landed for too long; cancelling the run before its claim can be taken",
				"job_id", l.claim.ID, "kind", l.claim.Kind, "process_id", p.ID(),
				"silence", s.Round(time.Millisecond), "bound", l.bound)
			l.fence(l.lapsed(s))
		}
	}
}

// fenceAll fences every run: the process was declared dead.
func (p *process) fenceAll(cause error) {
	for _, l := range p.activeLeases() {
		l.fence(cause)
	}
}

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
// vanished (lost in a failover, reaped, cancelled) stops within a beat.
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
		// process was cut off, that lost claims its runs hold. They are
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
			p.c.log.Warn("a run's claim is gone (taken while this process was paused or cut off, lost in a failover, or returned by a stop that outwaited the run); cancelling the run", "job_id", l.claim.ID, "process_id", id)
			l.fence(fmt.Errorf("%w: its claim is gone (taken while this process was paused or cut off, lost in a failover, or returned by a stop that outwaited the run)", p.c.cfg.LeaseLost))
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

func (p *process) deregister(ctx context.Context) {
	if err := p.c.drv.Exec().ProcessDeregister(ctx, p.ID()); err != nil {
		p.c.log.Warn("deregister process", "process_id", p.ID(), "error", err)
	}
}

// A lease is one run's right to go on. It holds while the process's newest
// landed heartbeat is younger than the run's bound: the least silence after
// which any dispatcher may take the claim, less one heartbeat interval.
// Once it lapses the run is fenced: its context is cancelled for good.
type lease struct {
	proc   *process
	claim  *driver.Claim
	bound  time.Duration
	seq    uint64 // order of creation, for verifyClaims
	cancel context.CancelCauseFunc
	fenced atomic.Bool
	// cancelled: a cancel of the job cancelled the run (ErrCancelled).
	// Unlike fenced, the claim is still the run's: its end records.
	cancelled atomic.Bool
	// returned: the job's code returned; its outcome is being recorded,
	// which deletes the claim before the lease is dropped.
	returned atomic.Bool
}

// check fences the run if its lease has lapsed. It runs on every Err and
// Done of the job's context, so it only reads the clock and one pointer.
func (l *lease) check() {
	if l.fenced.Load() {
		return
	}
	if s := l.proc.silence(l.proc.c.cfg.Now()); s > l.bound {
		l.fence(l.lapsed(s))
	}
}

// lapsed is the cause of a run fenced after a silence s past its bound.
func (l *lease) lapsed(s time.Duration) error {
	return fmt.Errorf("%w: no heartbeat of this process landed for %s (the process was paused, or the database was unreachable), past the %s after which its claim may be taken",
		l.proc.c.cfg.LeaseLost, s.Round(time.Millisecond), l.bound)
}

// fence cancels the run with cause, once.
func (l *lease) fence(cause error) {
	if l.fenced.CompareAndSwap(false, true) {
		l.cancel(cause)
	}
}

// runContext is the context a job runs with. Err and Done compare the
// run's lease with the clock on every call, so a run whose process was
// paused past its lease sees ctx cancelled at its very next check, before
// any timer or heartbeat goroutine has had a chance to run. Contexts the
// job derives from it see the cancellation when the process's watchdog
// runs, a few milliseconds after the resume.
type runContext struct {
	context.Context
	lease *lease
}

func (c runContext) Err() error {
	c.lease.check()
	return c.Context.Err()
}

func (c runContext) Done() <-chan struct{} {
	c.lease.check()
	return c.Context.Done()
}

// elapsed is the time from since to now by both the monotonic and the wall
// clock, whichever says more: the monotonic clock stops while a machine
// is suspended, and dispatchers elsewhere judge by wall time.
func elapsed(now, since time.Time) time.Duration {
	return max(now.Sub(since), now.Round(0).Sub(since.Round(0)))
}

// outageReport is how often an ongoing database outage is logged again.
const outageReport = 30 * time.Second

// outage logs database trouble as an event rather than per call: once when
// calls start failing (with the cause), every outageReport while they go
// on (with how many failed), and once when one succeeds again (with how
// long it lasted). Every poll of every queue fails during an outage; a
// line for each would drown the one that matters.
//
// A database that refuses writes (read-only, full) still answers reads,
// and a write begun before it turned read-only may still commit: once a
// call was refused so, the outage ends only with a write begun after the
// last refusal. Else a claim that found nothing, a dispatcher pass with
// nothing to do or a completion in flight at the switch would end it,
// and the next write start it again, logging both each time.
type outage struct {
	down atomic.Bool

	mu         sync.Mutex
	since      time.Time
	lastReport time.Time
	failures   int
	back       chan struct{} // closed when the outage ends
	// refusedAt is when a call of this outage was last refused for the
	// database taking no writes; zero when none was.
	refusedAt time.Time
}

// readyNow is a channel that is always ready.
var readyNow = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// recovered is ready once the current outage has ended (at once if there
// is none): a call waiting to retry need not wait out its backoff.
func (o *outage) recovered() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down.Load() {
		return readyNow
	}
	return o.back
}

// dbFailed records a failed database call of the named service.
func (c *Runtime) dbFailed(what string, err error) {
	c.outage.failed(c, what, err)
	if p := c.active.Load(); p != nil {
		p.suspect()
	}
}

// dbOK records a database call that succeeded, which ends an outage.
// wrote is when the write it made began; zero when it may have written
// nothing (see outage).
func (c *Runtime) dbOK(what string, wrote time.Time) {
	if w := wrote.UnixNano(); !wrote.IsZero() {
		for last := c.wrote.Load(); w > last && !c.wrote.CompareAndSwap(last, w); last = c.wrote.Load() {
		}
	}
	c.outage.ok(c, what, wrote)
}

// lastWrite is when the newest write of this runtime that landed began
// (the zero time before one has).
func (c *Runtime) lastWrite() time.Time {
	if w := c.wrote.Load(); w != 0 {
		return time.Unix(0, w)
	}
	return time.Time{}
}

func (o *outage) failed(c *Runtime, what string, err error) {
	now := c.cfg.Now()
	refusal := c.drv.Refusal(err)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failures++
	if refusal != driver.NotRefused {
		o.refusedAt = now
	}
	switch {
	case !o.down.Load():
		o.down.Store(true)
		o.since, o.lastReport, o.failures = now, now, 1
		o.back = make(chan struct{})
		if refusal == driver.NotRefused {
			o.refusedAt = time.Time{}
		}
		msg := "database calls are failing; bq retries with backoff"
		switch refusal {
		case driver.ReadOnly:
			msg = "the database refuses writes (read-only: a standby, or a database set read-only); bq retries with backoff and goes on once it takes writes"
		case driver.Full:
			msg = "the database is full (out of disk or table space); bq retries with backoff and goes on once it has room"
		}
		c.log.Error(msg, "service", what, "error", err)
	case now.Sub(o.lastReport) >= outageReport:
		o.lastReport = now
		c.log.Error("database calls still failing", "service", what, "for", now.Sub(o.since).Round(time.Second),
			"failed_calls", o.failures, "error", err)
	}
}

func (o *outage) ok(c *Runtime, what string, wrote time.Time) {
	if !o.down.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down.Load() || !o.refusedAt.IsZero() && !wrote.After(o.refusedAt) {
		return
	}
	o.down.Store(false)
	close(o.back)
	c.log.Warn("database calls succeed again", "service", what,
		"outage", c.cfg.Now().Sub(o.since).Round(time.Millisecond), "failed_calls", o.failures)
}
