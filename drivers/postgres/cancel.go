package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (e *executor) JobCancel(ctx context.Context, p driver.JobCancelParams) error {
	jobID, now, ran, msg := p.JobID, p.Now, p.Ran, p.Msg
	if err := e.write(ctx, e.q.cancelJob, jobID, now, ran, msg); err != nil {
		return fmt.Errorf("finish job %d as cancelled: %w", jobID, err)
	}
	return nil
}

func (e *executor) ClaimMarkCancel(ctx context.Context, jobID int64, now time.Time) (time.Time, bool, error) {
	var at time.Time
	ok, err := found(e.db.QueryRow(ctx, e.q.markCancel, jobID, now).Scan(&at))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("mark the claim of job %d cancelled: %w", jobID, err)
	}
	return at, ok, nil
}
