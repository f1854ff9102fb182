package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// The inspection statements: read-only, for health, explain and the UI.

// collect scans every row of query with scan.
func collect[T any](ctx context.Context, e *executor, scan func(*sql.Rows) (T, error), query string, args ...any) ([]T, error) {
	rows, err := e.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// optMicros reads a nullable time column.
func optMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

func (e *executor) ReadyAges(ctx context.Context) ([]driver.QueueAge, error) {
	out, err := collect(ctx, e, func(r *sql.Rows) (a driver.QueueAge, err error) {
		var oldest int64
		err = r.Scan(&a.Queue, &oldest)
		a.OldestReady = fromMicros(oldest)
		return a, err
	}, e.q.readyAges)
	if err != nil {
		return nil, fmt.Errorf("read ready ages: %w", err)
	}
	return out, nil
}

func (e *executor) GroupStats(ctx context.Context, max int) ([]driver.GroupStats, error) {
	out, err := collect(ctx, e, func(r *sql.Rows) (g driver.GroupStats, err error) {
		err = r.Scan(&g.Group, &g.Keys, &g.MinLimit, &g.MaxLimit, &g.Active, &g.Blocked, &g.Saturated)
		return g, err
	}, e.q.groupStats, max)
	if err != nil {
		return nil, fmt.Errorf("sum semaphores by group: %w", err)
	}
	return out, nil
}

func (e *executor) TopBlockedKeys(ctx context.Context, max int) ([]driver.Semaphore, error) {
	out, err := collect(ctx, e, func(r *sql.Rows) (s driver.Semaphore, err error) {
		var durMS, expires int64
		err = r.Scan(&s.Key, &s.Value, &s.Limit, &s.Blocked, &durMS, &expires)
		s.Duration, s.ExpiresAt = time.Duration(durMS)*time.Millisecond, fromMicros(expires)
		return s, err
	}, e.q.topBlockedKeys, max)
	if err != nil {
		return nil, fmt.Errorf("list keys with blocked jobs: %w", err)
	}
	return out, nil
}

func (e *executor) ReadSemaphore(ctx context.Context, key string) (driver.Semaphore, bool, error) {
	s := driver.Semaphore{Key: key}
	var durMS, expires int64
	err := e.db.QueryRowContext(ctx, e.q.readSem, hash(key), []byte(key)).Scan(&s.Value, &s.Limit, &s.Blocked, &durMS, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("read semaphore %q: %w", key, err)
	}
	s.Duration, s.ExpiresAt = time.Duration(durMS)*time.Millisecond, fromMicros(expires)
	return s, true, nil
}

func (e *executor) KeyHolders(ctx context.Context, key string, max int) ([]driver.Holder, error) {
	out, err := collect(ctx, e, func(r *sql.Rows) (h driver.Holder, err error) {
		var beat, claimed sql.NullInt64
		err = r.Scan(&h.JobID, &h.Kind, &h.Queue, &h.Running, &h.ProcessID, &h.ProcessName, &beat, &claimed)
		h.ProcessBeat, h.ClaimedAt = optMicros(beat), optMicros(claimed)
		return h, err
	}, e.q.keyHolders, hash(key), max)
	if err != nil {
		return nil, fmt.Errorf("list holders of %q: %w", key, err)
	}
	return out, nil
}

func (e *executor) BlockedAhead(ctx context.Context, key string, priority int, jobID int64) (int, error) {
	var n int
	if err := e.db.QueryRowContext(ctx, e.q.blockedAhead, hash(key), priority, priority, jobID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count blocked jobs ahead of job %d: %w", jobID, err)
	}
	return n, nil
}

func (e *executor) BlockedLine(ctx context.Context, key string, max int) ([]driver.BlockedJob, error) {
	out, err := collect(ctx, e, func(r *sql.Rows) (b driver.BlockedJob, err error) {
		var since int64
		err = r.Scan(&b.JobID, &b.Kind, &b.Queue, &b.Priority, &since)
		b.Since = fromMicros(since)
		return b, err
	}, e.q.blockedLine, hash(key), max)
	if err != nil {
		return nil, fmt.Errorf("list blocked jobs of %q: %w", key, err)
	}
	return out, nil
}

func (e *executor) JobExecution(ctx context.Context, id int64) (driver.ExecutionDetail, bool, error) {
	var x driver.ExecutionDetail
	var ready, blocked, due, claimed, failed, beat sql.NullInt64
	err := e.db.QueryRowContext(ctx, e.q.jobExecution, id).Scan(&ready, &blocked, &due, &claimed, &failed,
		&x.ProcessID, &x.ProcessName, &beat)
	if errors.Is(err, sql.ErrNoRows) {
		return x, false, nil
	}
	if err != nil {
		return x, false, fmt.Errorf("read execution of job %d: %w", id, err)
	}
	x.ReadySince, x.BlockedSince, x.DueAt = optMicros(ready), optMicros(blocked), optMicros(due)
	x.ClaimedAt, x.FailedAt, x.ProcessBeat = optMicros(claimed), optMicros(failed), optMicros(beat)
	return x, true, nil
}

func (e *executor) ListFailed(ctx context.Context, before int64, max int) ([]driver.FailedJob, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	out, err := collect(ctx, e, func(r *sql.Rows) (f driver.FailedJob, err error) {
		var failedAt int64
		err = r.Scan(&f.JobID, &f.Kind, &f.Queue, &f.Key, &f.Attempt, &f.Error, &failedAt)
		f.FailedAt = fromMicros(failedAt)
		return f, err
	}, e.q.listFailed, before, max)
	if err != nil {
		return nil, fmt.Errorf("list failed jobs: %w", err)
	}
	return out, nil
}

func (e *executor) DeleteFailed(ctx context.Context, jobID int64) (bool, error) {
	n, err := e.exec(ctx, e.q.deleteFailed, jobID)
	if err != nil {
		return false, fmt.Errorf("delete failed execution of job %d: %w", jobID, err)
	}
	return n == 1, nil
}
