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

func (a autoTx) JobInsertMany(ctx context.Context, now time.Time, jobs []*driver.NewJob) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.JobInsertMany(ctx, now, jobs) })
}

func (a autoTx) ExecutionInsertMany(ctx context.Context, state driver.JobState, rows []driver.Execution) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.ExecutionInsertMany(ctx, state, rows) })
}

func (a autoTx) JobDeleteMany(ctx context.Context, ids []int64) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.JobDeleteMany(ctx, ids) })
}

func (a autoTx) SemaphoreRenewHeld(ctx context.Context, processID int64, at time.Time, renewBelow float64) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.SemaphoreRenewHeld(ctx, processID, at, renewBelow) })
}

func (a autoTx) ReadyClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) ([]*driver.Claim, error) { return ex.ReadyClaim(ctx, p) })
}

func (a autoTx) ClaimCompleteMany(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Ended, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) ([]driver.Ended, error) {
		return ex.ClaimCompleteMany(ctx, claims, keep, now)
	})
}

func (a autoTx) ScheduledTakeDue(ctx context.Context, now time.Time, max int) ([]*driver.Job, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) ([]*driver.Job, error) { return ex.ScheduledTakeDue(ctx, now, max) })
}

func (a autoTx) LinePromote(ctx context.Context, key string, n int, now time.Time) (driver.Promotion, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) (driver.Promotion, error) { return ex.LinePromote(ctx, key, n, now) })
}

func (a autoTx) SemaphoreDeleteIdle(ctx context.Context, now time.Time, max int) (int, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) (int, error) { return ex.SemaphoreDeleteIdle(ctx, now, max) })
}

func (a autoTx) ProcessDeleteDead(ctx context.Context, now time.Time, deadAfter time.Duration) (int, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) (int, error) { return ex.ProcessDeleteDead(ctx, now, deadAfter) })
}

func (a autoTx) ClaimListReapable(ctx context.Context, now time.Time, deadAfter time.Duration, max int) ([]*driver.Claim, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) ([]*driver.Claim, error) {
		return ex.ClaimListReapable(ctx, now, deadAfter, max)
	})
}

func (a autoTx) ClaimListReapableOfKey(ctx context.Context, key string, now time.Time, silence time.Duration) ([]*driver.Claim, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) ([]*driver.Claim, error) {
		return ex.ClaimListReapableOfKey(ctx, key, now, silence)
	})
}

func (a autoTx) RateEnsure(ctx context.Context, spec driver.RateSpec, now time.Time) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.RateEnsure(ctx, spec, now) })
}

func (a autoTx) RateResizeRing(ctx context.Context, key string, from, to int) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.RateResizeRing(ctx, key, from, to) })
}

func (a autoTx) RateSlotSetMany(ctx context.Context, p driver.RateSlotsParams) error {
	return driver.Atomic(ctx, a.d, func(ex driver.Executor) error { return ex.RateSlotSetMany(ctx, p) })
}

func (a autoTx) RateDeleteIdle(ctx context.Context, now time.Time, max int) (int, error) {
	return atomically(ctx, a.d, func(ex driver.Executor) (int, error) { return ex.RateDeleteIdle(ctx, now, max) })
}
