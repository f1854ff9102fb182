package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// ErrStartedLate ends a rated run that did not begin by its claim's
// StartBy: it is not run, and goes back to its rate key's line
// (lifecycle.StartedLate).
var ErrStartedLate = errors.New("bq: the rate-limited run did not begin within its start slack of its claim")

// beginGateKey holds the runContext of a claimed run, which must pass
// the begin gate before its middleware and again just before its job's
// own function (a middleware, or a freeze of the process while it ran,
// can take any time): the run's lease must still hold, or its claim may
// be taken and the job run elsewhere already; and a rated run must begin
// by its claim's StartBy, so no start the job sees comes later than the
// one its key's ring counts.
type beginGateKey struct{}

// gated is rc with its begin gate attached.
func gated(rc runContext) context.Context {
	return context.WithValue(rc, beginGateKey{}, rc)
}

// MayBegin reports why the run of ctx must not begin now, or nil. A
// context without a gate (bqtest.Work) always may.
func MayBegin(ctx context.Context) error {
	rc, ok := ctx.Value(beginGateKey{}).(runContext)
	if !ok {
		return nil
	}
	l := rc.lease
	if l.check(); l.fenced.Load() {
		if cause := context.Cause(rc); cause != nil {
			return cause
		}
		return l.proc.c.cfg.LeaseLost // fenced by another goroutine, its cancel still under way
	}
	if by := l.claim.StartBy; !by.IsZero() && l.proc.c.cfg.Now().After(by) {
		return ErrStartedLate
	}
	return nil
}

// rateWaits tells this process's dispatcher, if it runs one, that a job
// went to a rate line, so it looks at the lines now rather than at its
// next poll.
func (c *Runtime) rateWaits() {
	select {
	case c.rateWake <- struct{}{}:
	default:
	}
}

// GatedRun is the context of a run behind its begin gate, for tests of
// code that calls MayBegin: its process's last beat landed at now(), its
// lease lapses after bound of silence, and startBy, when not zero, is a
// rated claim's start slack. cancel ends it.
func GatedRun(parent context.Context, now func() time.Time, bound time.Duration, startBy time.Time, leaseLost error) (ctx context.Context, cancel context.CancelCauseFunc) {
	c := &Runtime{cfg: Config{Now: now, LeaseLost: leaseLost}, log: slog.New(slog.DiscardHandler)}
	p := &process{c: c}
	beat := now()
	p.lastBeat.Store(&beat)
	base, cancel := context.WithCancelCause(parent)
	l := &lease{proc: p, claim: &driver.Claim{StartBy: startBy}, bound: bound, cancel: cancel}
	return gated(runContext{Context: base, lease: l}), cancel
}
