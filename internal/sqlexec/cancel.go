package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (s Shared) ExecutionDelete(ctx context.Context, state driver.JobState, jobID int64) (bool, error) {
	if state == driver.StateFailed {
		return s.FailedDelete(ctx, jobID)
	}
	query, ok := s.q.DeleteExecution.Of(state)
	if !ok {
		return false, fmt.Errorf("delete execution of job %d: no execution table for state %q", jobID, state)
	}
	n, err := s.c.Write(ctx, query, jobID)
	if err != nil {
		return false, fmt.Errorf("delete %s execution of job %d: %w", state, jobID, err)
	}
	return n == 1, nil
}

func (s Shared) FailedDelete(ctx context.Context, jobID int64) (bool, error) {
	n, err := s.c.Write(ctx, s.q.DeleteFailed, jobID)
	if err != nil {
		return false, fmt.Errorf("delete failed execution of job %d: %w", jobID, err)
	}
	return n == 1, nil
}

func (e *Executor) JobCancel(ctx context.Context, p driver.JobCancelParams) error {
	jobID, now, ran, msg := p.JobID, p.Now, p.Ran, p.Msg
	attempt := 0
	if ran {
		attempt = 1
	}
	if _, err := e.exec(ctx, e.q.CancelJob, attempt, Micros(now), true, msg, jobID); err != nil {
		return fmt.Errorf("finish job %d as cancelled: %w", jobID, err)
	}
	return nil
}

func (e *Executor) ClaimMarkCancel(ctx context.Context, jobID int64, now time.Time) (time.Time, bool, error) {
	var at sql.NullInt64
	err := e.Atomic(ctx, func(x *Executor) error {
		var fence int64
		ok, err := found(x.db.QueryRowContext(ctx, x.q.ClaimFence, jobID).Scan(&fence))
		if !ok || err != nil {
			return err
		}
		if _, err := x.db.ExecContext(ctx, x.q.MarkCancel, Micros(now), fence); err != nil {
			return err
		}
		// Read back rather than count: MySQL counts a row the UPDATE left
		// as it was (an earlier mark kept) as unaffected. No row: the
		// claim ended meanwhile.
		_, err = found(x.db.QueryRowContext(ctx, x.q.CancelMark, fence).Scan(&at))
		return err
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("mark the claim of job %d cancelled: %w", jobID, err)
	}
	if !at.Valid {
		return time.Time{}, false, nil
	}
	return FromMicros(at.Int64), true, nil
}

func (s Shared) ClaimCancelRequested(ctx context.Context, jobID, fence int64) (bool, error) {
	var marked bool
	if _, err := found(s.c.QueryRow(ctx, s.q.CancelRequested, fence, jobID).Scan(&marked)); err != nil {
		return false, fmt.Errorf("read the cancel mark of job %d: %w", jobID, err)
	}
	return marked, nil
}
