package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// TestCheckWaitsForAFenceUnderWay: right after a resume the watchdog and a
// run that checks ctx in a busy loop both find the lease lapsed. Whichever
// fences first, the run's check must not return before the run's context
// is cancelled: a check that saw the fence begun and returned at once let
// ctx.Err() read nil after a 5 s pause (CI, ResumedRunSeesCtxAtNextCheck).
func TestCheckWaitsForAFenceUnderWay(t *testing.T) {
	now := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	lost := errors.New("lease lost")
	c := &Runtime{cfg: Config{Now: func() time.Time { return now }, HeartbeatInterval: time.Second,
		ProcessDeadAfter: 10 * time.Second, LeaseLost: lost}, log: slog.New(slog.DiscardHandler)}
	p := &process{c: c, id: 7, leases: map[*lease]struct{}{}}
	beat := now.Add(-time.Minute) // paused for a minute
	p.lastBeat.Store(&beat)

	runCtx, stop := context.WithCancelCause(context.Background())
	began, release := make(chan struct{}), make(chan struct{})
	slowCancel := func(cause error) { // the watchdog, descheduled mid-cancel
		close(began)
		<-release
		stop(cause)
	}
	l := p.newLease(&driver.Claim{Job: driver.Job{ID: 1}}, slowCancel)
	rc := runContext{Context: runCtx, lease: l}

	go l.fence(l.lapsed(time.Minute))
	<-began
	seen := make(chan error, 1)
	go func() { seen <- rc.Err() }()
	select {
	case err := <-seen:
		t.Fatalf("the run's check returned %v while the fence was under way; want it to wait for the cancel", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-seen; !errors.Is(err, context.Canceled) || !errors.Is(context.Cause(rc), lost) {
		t.Fatalf("the run's check after the fence: err %v, cause %v; want cancelled with the lease lost", err, context.Cause(rc))
	}
}
