package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
)

// The inspection statements: read-only, for health, explain and the UI.

func (e *executor) ReadyAges(ctx context.Context) ([]driver.QueueAge, error) {
	out, err := collect(ctx, e.db, pgx.RowToStructByPos[driver.QueueAge], e.q.readyAges)
	if err != nil {
		return nil, fmt.Errorf("read ready ages: %w", err)
	}
	return out, nil
}

func (e *executor) GroupStats(ctx context.Context, max int) ([]driver.GroupStats, error) {
	out, err := collect(ctx, e.db, func(r pgx.CollectableRow) (g driver.GroupStats, err error) {
		err = r.Scan(&g.Group, &g.Keys, &g.MinLimit, &g.MaxLimit, &g.Active, &g.Blocked, &g.Saturated)
		return g, err
	}, e.q.groupStats, max)
	if err != nil {
		return nil, fmt.Errorf("sum semaphores by group: %w", err)
	}
	return out, nil
}

func (e *executor) TopBlockedKeys(ctx context.Context, max int) ([]driver.Semaphore, error) {
	out, err := collect(ctx, e.db, scanSemaphore, e.q.topBlockedKeys, max)
	if err != nil {
		return nil, fmt.Errorf("list keys with blocked jobs: %w", err)
	}
	return out, nil
}

// scanSemaphore reads key, value, lim, blocked, multi, duration_ms, expires_at.
func scanSemaphore(r pgx.CollectableRow) (s driver.Semaphore, err error) {
	var durMS int64
	err = r.Scan(&s.Key, &s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &s.ExpiresAt)
	s.Duration = time.Duration(durMS) * time.Millisecond
	return s, err
}

func (e *executor) ReadSemaphore(ctx context.Context, key string) (driver.Semaphore, bool, error) {
	s := driver.Semaphore{Key: key}
	var durMS int64
	ok, err := found(e.db.QueryRow(ctx, e.q.readSem, key).Scan(&s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &s.ExpiresAt))
	if err != nil {
		return s, false, fmt.Errorf("read semaphore %q: %w", key, err)
	}
	s.Duration = time.Duration(durMS) * time.Millisecond
	return s, ok, nil
}

func (e *executor) KeyHolders(ctx context.Context, key string, max int) ([]driver.Holder, error) {
	out, err := collect(ctx, e.db, func(r pgx.CollectableRow) (h driver.Holder, err error) {
		var beat, claimed *time.Time
		err = r.Scan(&h.JobID, &h.Kind, &h.Queue, &h.Running, &h.ProcessID, &h.ProcessName, &beat, &claimed)
		h.ProcessBeat, h.ClaimedAt = deref(beat), deref(claimed)
		return h, err
	}, e.q.keyHolders, key, max)
	if err != nil {
		return nil, fmt.Errorf("list holders of %q: %w", key, err)
	}
	return out, nil
}

func (e *executor) BlockedAhead(ctx context.Context, key string, priority int, jobID int64, max int) (int, error) {
	var n int
	if err := e.db.QueryRow(ctx, e.q.blockedAhead, key, priority, jobID, max).Scan(&n); err != nil {
		return 0, fmt.Errorf("count blocked jobs ahead of job %d: %w", jobID, err)
	}
	return n, nil
}

func (e *executor) BlockedLine(ctx context.Context, key string, max int) ([]driver.BlockedJob, error) {
	out, err := collect(ctx, e.db, func(r pgx.CollectableRow) (b driver.BlockedJob, err error) {
		err = r.Scan(&b.JobID, &b.Kind, &b.Queue, &b.Priority, &b.Since)
		return b, err
	}, e.q.blockedLine, key, max)
	if err != nil {
		return nil, fmt.Errorf("list blocked jobs of %q: %w", key, err)
	}
	return out, nil
}

func (e *executor) JobExecution(ctx context.Context, id int64) (driver.ExecutionDetail, bool, error) {
	var x driver.ExecutionDetail
	var ready, blocked, due, claimed, failed, beat, cancel *time.Time
	ok, err := found(e.db.QueryRow(ctx, e.q.jobExecution, id).Scan(&ready, &blocked, &due, &claimed, &failed,
		&x.ProcessID, &x.ProcessName, &beat, &cancel))
	if err != nil {
		return x, false, fmt.Errorf("read execution of job %d: %w", id, err)
	}
	if !ok {
		return x, false, nil
	}
	x.ReadySince, x.BlockedSince, x.DueAt = deref(ready), deref(blocked), deref(due)
	x.ClaimedAt, x.FailedAt, x.ProcessBeat = deref(claimed), deref(failed), deref(beat)
	x.CancelRequestedAt = deref(cancel)
	return x, true, nil
}

func (e *executor) ListFailed(ctx context.Context, before int64, max int) ([]driver.FailedJob, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	out, err := collect(ctx, e.db, func(r pgx.CollectableRow) (f driver.FailedJob, err error) {
		err = r.Scan(&f.JobID, &f.Kind, &f.Queue, &f.Key, &f.Attempt, &f.Error, &f.FailedAt)
		return f, err
	}, e.q.listFailed, before, max)
	if err != nil {
		return nil, fmt.Errorf("list failed jobs: %w", err)
	}
	return out, nil
}

func (e *executor) DeleteFailed(ctx context.Context, jobID int64) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteFailed, jobID)
	if err != nil {
		return false, fmt.Errorf("delete failed execution of job %d: %w", jobID, err)
	}
	return tag.RowsAffected() == 1, nil
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
