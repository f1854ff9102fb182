package drivertest

import (
	"context"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// autoTx is an executor outside any transaction that runs each method
// as the engine does: the ones that may take several statements (the
// contract says "run it in a transaction") in a transaction of their own
// (driver.Atomic), the others as they are.
type autoTx struct {
	driver.Executor
	d driver.Driver
}

func atomically[T any](ctx context.Context, d driver.Driver, fn func(ex driver.Executor) (T, error)) (T, error) {
	var out T
	err := driver.Atomic(ctx, d, func(ex driver.Executor) (err error) {
		out, err = fn(ex)
		return err
	})
	return out, err
}

func (a autoTx) InsertJobs(ctx context.Context, now time.Time, jobs []*driver.NewJob) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.InsertJobs(ctx, now, jobs) })
}

func (a autoTx) InsertExecutions(ctx context.Context, state driver.JobState, rows []driver.Execution) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.InsertExecutions(ctx, state, rows) })
}

func (a autoTx) DeleteJobs(ctx context.Context, ids []int64) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.DeleteJobs(ctx, ids) })
}

func (a autoTx) RenewHeld(ctx context.Context, processID int64, at time.Time, renewBelow float64) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.RenewHeld(ctx, processID, at, renewBelow) })
}

func (a autoTx) ClaimReady(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) ([]*driver.Claim, error) { return ex.ClaimReady(ctx, p) })
}

func (a autoTx) CompleteClaims(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Fenced, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) ([]driver.Fenced, error) {
		return ex.CompleteClaims(ctx, claims, keep, now)
	})
}

func (a autoTx) TakeDueScheduled(ctx context.Context, now time.Time, max int) ([]*driver.Job, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) ([]*driver.Job, error) { return ex.TakeDueScheduled(ctx, now, max) })
}

func (a autoTx) PromoteBlocked(ctx context.Context, key string, n int, now time.Time) (driver.Promotion, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) (driver.Promotion, error) { return ex.PromoteBlocked(ctx, key, n, now) })
}

func (a autoTx) DeleteIdleSemaphores(ctx context.Context, now time.Time, max int) (int, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) (int, error) { return ex.DeleteIdleSemaphores(ctx, now, max) })
}

func (a autoTx) DeleteDeadProcesses(ctx context.Context, now time.Time, deadAfter time.Duration) (int, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) (int, error) { return ex.DeleteDeadProcesses(ctx, now, deadAfter) })
}

func (a autoTx) LostClaims(ctx context.Context, now time.Time, deadAfter time.Duration, max int) ([]*driver.Claim, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) ([]*driver.Claim, error) {
		return ex.LostClaims(ctx, now, deadAfter, max)
	})
}

func (a autoTx) LostClaimsOfKey(ctx context.Context, key string, now time.Time, silence time.Duration) ([]*driver.Claim, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) ([]*driver.Claim, error) {
		return ex.LostClaimsOfKey(ctx, key, now, silence)
	})
}

func (a autoTx) RateEnsure(ctx context.Context, spec driver.RateSpec, now time.Time) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.RateEnsure(ctx, spec, now) })
}

func (a autoTx) ResizeRing(ctx context.Context, key string, from, to int) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.ResizeRing(ctx, key, from, to) })
}

func (a autoTx) SetSlots(ctx context.Context, key string, slots []int, jobIDs []int64, at time.Time) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.SetSlots(ctx, key, slots, jobIDs, at) })
}

func (a autoTx) DeleteIdleRates(ctx context.Context, now time.Time, max int) (int, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) (int, error) { return ex.DeleteIdleRates(ctx, now, max) })
}
