package worker

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bqueue/bq/internal/driver"
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
	// that no longer has claims this process's runs hold. The next beat that
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

func (p *process) deregister(ctx context.Context) {
	if err := p.c.drv.Exec().ProcessDeregister(ctx, p.ID()); err != nil {
		p.c.log.Warn("deregister process", "process_id", p.ID(), "error", err)
	}
}
