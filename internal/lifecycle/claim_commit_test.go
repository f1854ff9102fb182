package lifecycle_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/lifecycle"
)

// commitFails is a driver whose transactions do their work on a memstore
// and then fail to commit, as a connection lost under COMMIT does.
type commitFails struct {
	driver.Driver
	s *memstore.Store
}

type claimExec struct {
	driver.Executor
	s *memstore.Store
}

func (e claimExec) ReadyExists(ctx context.Context, q string) (bool, error) {
	return e.s.ReadyExists(ctx, q)
}
func (e claimExec) QueueGateGet(ctx context.Context, q string) (driver.Gate, error) {
	return e.s.QueueGateGet(ctx, q)
}
func (e claimExec) RunningSlots(ctx context.Context, q string) (int, error) {
	return e.s.RunningSlots(ctx, q)
}
func (e claimExec) ReadyClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	return e.s.ReadyClaim(ctx, p)
}

type failingTx struct{ claimExec }

var errCommit = errors.New("invalid connection")

func (failingTx) Commit(context.Context) error   { return errCommit }
func (failingTx) Rollback(context.Context) error { return nil }

func (d commitFails) Exec() driver.Executor { return claimExec{s: d.s} }
func (d commitFails) Begin(context.Context) (driver.Tx, error) {
	return failingTx{claimExec{s: d.s}}, nil
}
func (d commitFails) Retryable(error) bool { return false }
func (d commitFails) Claim(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	return driver.ClaimWithin(ctx, d, p, driver.ClaimWays{})
}

// A claim whose transaction failed to commit hands out no claim: had it
// rolled back, running them would run jobs that stay ready and run again;
// had it landed, the process's claim check unclaims them as strays.
func TestClaimWhoseCommitFailedRunsNothing(t *testing.T) {
	s := memstore.New()
	j := job("", 0, driver.Block, 0)
	j.State = driver.StateReady
	if err := s.JobInsertMany(ctx, now, []*driver.NewJob{j}); err != nil {
		t.Fatal(err)
	}
	claims, err := lifecycle.Claim(ctx, commitFails{s: s}, driver.ClaimParams{Queue: "q", Max: 5, ProcessID: 1, Now: now})
	if !errors.Is(err, errCommit) {
		t.Fatalf("claim with a failing COMMIT: %v, want its error", err)
	}
	if len(claims) != 0 {
		t.Fatalf("claim with a failing COMMIT handed out %d claims, want none", len(claims))
	}
}
