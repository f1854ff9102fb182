package worker

// What a run's context carries: its Meta, the writer of its output
// (SetOutput) and its begin gate (MayBegin), which a claimed run passes
// before its middleware and again just before its job.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

type metaKey struct{}

// outputKey holds a run's output writer (SetOutput).
type outputKey struct{}

type outputWriter struct {
	drv       driver.Driver
	id, fence int64
}

// ErrNotRunning refuses SetOutput outside a run, or from a run whose
// claim was taken (its process was paused or cut off past its lease).
var ErrNotRunning = errors.New("not a live run of a job")

// SetOutput stores raw as the output of the job ctx runs, while its
// claim holds.
func SetOutput(ctx context.Context, raw []byte) error {
	w, ok := ctx.Value(outputKey{}).(outputWriter)
	if !ok {
		return fmt.Errorf("%w: call it with the context bq passed the job's function", ErrNotRunning)
	}
	stored, err := w.drv.Exec().JobSetOutput(ctx, w.id, w.fence, raw)
	if err != nil {
		return err
	}
	if !stored {
		return fmt.Errorf("%w: job %d's claim was taken (fence %d); its output was not stored", ErrNotRunning, w.id, w.fence)
	}
	return nil
}

// RunDriver is the driver of the run ctx belongs to; false outside a run.
func RunDriver(ctx context.Context) (driver.Driver, bool) {
	w, ok := ctx.Value(outputKey{}).(outputWriter)
	return w.drv, ok
}

// WithMeta returns ctx carrying m, as a run's context does.
func WithMeta(ctx context.Context, m Meta) context.Context {
	return context.WithValue(ctx, metaKey{}, m)
}

// MetaFrom returns the Meta of the run whose context ctx is.
func MetaFrom(ctx context.Context) (Meta, bool) {
	m, ok := ctx.Value(metaKey{}).(Meta)
	return m, ok
}

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
		return context.Cause(rc) // set: fence marks fenced after its cancel
	}
	if by := l.claim.StartBy; !by.IsZero() {
		c := l.proc.c
		now := c.cfg.Now()
		c.startLag.see(now, now.Sub(by.Add(-l.claim.StartSlack)))
		if now.After(by) {
			return ErrStartedLate
		}
	}
	return nil
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
