package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (e *executor) DeleteExecution(ctx context.Context, state driver.JobState, jobID int64) (bool, error) {
	var query string
	switch state {
	case driver.StateReady:
		query = e.q.deleteReady
	case driver.StateScheduled:
		query = e.q.deleteScheduled
	case driver.StateBlocked:
		query = e.q.deleteBlocked
	case driver.StateFailed:
		return e.DeleteFailed(ctx, jobID)
	default:
		return false, fmt.Errorf("delete execution of job %d: no execution table for state %q", jobID, state)
	}
	tag, err := e.db.Exec(ctx, query, jobID)
	if err != nil {
		return false, fmt.Errorf("delete %s execution of job %d: %w", state, jobID, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) CancelJob(ctx context.Context, jobID int64, now time.Time, ran bool, msg string) error {
	if err := e.write(ctx, e.q.cancelJob, jobID, now, ran, msg); err != nil {
		return fmt.Errorf("finish job %d as cancelled: %w", jobID, err)
	}
	return nil
}

func (e *executor) MarkCancel(ctx context.Context, jobID int64, now time.Time) (time.Time, bool, error) {
	var at time.Time
	ok, err := found(e.db.QueryRow(ctx, e.q.markCancel, jobID, now).Scan(&at))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("mark the claim of job %d cancelled: %w", jobID, err)
	}
	return at, ok, nil
}

func (e *executor) CancelRequested(ctx context.Context, jobID, fence int64) (bool, error) {
	var marked bool
	if _, err := found(e.db.QueryRow(ctx, e.q.cancelRequested, jobID, fence).Scan(&marked)); err != nil {
		return false, fmt.Errorf("read the cancel mark of job %d: %w", jobID, err)
	}
	return marked, nil
}
