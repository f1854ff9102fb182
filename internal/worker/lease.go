package worker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

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
	// fencing runs the fence once; a caller that comes while it runs
	// waits for it, so no check returns before the context is cancelled.
	fencing sync.Once
	// fenced: the run's context is cancelled for good (set after the
	// cancel, so a check that reads it can trust ctx.Err()).
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

// fence cancels the run with cause, once. A fence that another goroutine
// (the watchdog) began is waited for: a run that checks ctx right after a
// resume must see it cancelled, not a cancel still under way.
func (l *lease) fence(cause error) {
	l.fencing.Do(func() {
		l.cancel(cause)
		l.fenced.Store(true)
	})
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
