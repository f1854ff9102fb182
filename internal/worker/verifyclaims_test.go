package worker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// claimsDB is a driver whose process holds no claims at all.
type claimsDB struct{ driver.Driver }

type claimsExec struct{ driver.Executor }

func (claimsDB) Exec() driver.Executor { return claimsExec{} }
func (claimsExec) ClaimListOfProcess(context.Context, int64) ([]driver.OwnClaim, error) {
	return nil, nil
}

// TestClaimCheckStopsOnlyRunsStillRunning: the claim check after a beat
// (every beat, since a failover can lose claims unseen) cancels a run
// whose claim is gone, with ErrLeaseLost; a run whose code has returned
// is left alone and nothing is said of it: its claim is gone because its
// own outcome committed, before its lease was dropped.
func TestClaimCheckStopsOnlyRunsStillRunning(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	lost := errors.New("lease lost")
	c := &Runtime{drv: claimsDB{}, cfg: Config{Now: func() time.Time { return now }, HeartbeatInterval: time.Second,
		ProcessDeadAfter: 10 * time.Second, LeaseLost: lost}, log: slog.New(slog.NewTextHandler(&buf, nil))}
	p := &process{c: c, id: 7, leases: map[*lease]struct{}{}}
	p.lastBeat.Store(&now)
	runCtx, stopRun := context.WithCancelCause(context.Background())
	doneCtx, stopDone := context.WithCancelCause(context.Background())
	running := p.newLease(&driver.Claim{Job: driver.Job{ID: 1}, Fence: 11}, stopRun)
	done := p.newLease(&driver.Claim{Job: driver.Job{ID: 2}, Fence: 12}, stopDone)
	done.returned.Store(true)

	if !p.verifyClaimsWithin(context.Background()) {
		t.Fatal("the check could not read the claims")
	}
	if !running.fenced.Load() || !errors.Is(context.Cause(runCtx), lost) {
		t.Errorf("the running run whose claim is gone: fenced %v, cause %v; want fenced with the lease lost", running.fenced.Load(), context.Cause(runCtx))
	}
	if done.fenced.Load() || doneCtx.Err() != nil {
		t.Errorf("the run whose code returned was fenced (cause %v): its own outcome deleted its claim", context.Cause(doneCtx))
	}
	if out := buf.String(); !strings.Contains(out, "job_id=1") || strings.Contains(out, "job_id=2") {
		t.Errorf("the log names the wrong runs:\n%s", out)
	}
}
