package postgres

import (
	"context"
	"fmt"
	"time"
)

// cancelQueries are the cancel's statements PostgreSQL spells its own way
// (the others are sqlexec.Shared's).
type cancelQueries struct {
	cancelJob, markCancel string
}

func newCancelQueries(p func(string) string) cancelQueries {
	return cancelQueries{
		cancelJob: p(`UPDATE {p}jobs SET attempt = attempt + CASE WHEN $3 THEN 1 ELSE 0 END, finished_at = $2,
	cancelled = true, last_error = coalesce(nullif($4::text, ''), last_error) WHERE id = $1`),
		markCancel: p(`UPDATE {p}claimed_executions SET cancel_requested_at = coalesce(cancel_requested_at, $2)
WHERE job_id = $1 RETURNING cancel_requested_at`),
	}
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
