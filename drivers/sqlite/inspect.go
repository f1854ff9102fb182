package sqlite

import (
	"context"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlinspect"
)

// The inspection statements (read-only, for Health, Explain and the UI)
// are run by sqlinspect with this driver's SQL.

func (e *executor) inspector() sqlinspect.Reader {
	return sqlinspect.Reader{DB: e.db, Q: &e.q.inspect, Key: func(key string) []any { return []any{key} }}
}

func (e *executor) ReadyAges(ctx context.Context) ([]driver.QueueAge, error) {
	return e.inspector().ReadyAges(ctx)
}

func (e *executor) GroupStats(ctx context.Context, max int) ([]driver.GroupStats, error) {
	return e.inspector().GroupStats(ctx, max)
}

func (e *executor) TopBlockedKeys(ctx context.Context, max int) ([]driver.Semaphore, error) {
	return e.inspector().TopBlockedKeys(ctx, max)
}

func (e *executor) ReadSemaphore(ctx context.Context, key string) (driver.Semaphore, bool, error) {
	return e.inspector().ReadSemaphore(ctx, key)
}

func (e *executor) KeyHolders(ctx context.Context, key string, max int) ([]driver.Holder, error) {
	return e.inspector().KeyHolders(ctx, key, max)
}

func (e *executor) BlockedAhead(ctx context.Context, key string, priority int, jobID int64, max int) (int, error) {
	return e.inspector().BlockedAhead(ctx, key, priority, jobID, max)
}

func (e *executor) BlockedLine(ctx context.Context, key string, max int) ([]driver.BlockedJob, error) {
	return e.inspector().BlockedLine(ctx, key, max)
}

func (e *executor) JobExecution(ctx context.Context, id int64) (driver.ExecutionDetail, bool, error) {
	return e.inspector().JobExecution(ctx, id)
}

func (e *executor) ListFailed(ctx context.Context, before int64, max int) ([]driver.FailedJob, error) {
	return e.inspector().ListFailed(ctx, before, max)
}

func (e *executor) DeleteFailed(ctx context.Context, jobID int64) (bool, error) {
	n, err := e.exec(ctx, e.q.deleteFailed, jobID)
	if err != nil {
		return false, fmt.Errorf("delete failed execution of job %d: %w", jobID, err)
	}
	return n == 1, nil
}
