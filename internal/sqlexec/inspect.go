package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/bqueue/bq/internal/driver"
)

// The inspection statements: read-only, for Health, Explain and the UI.

func (e *Executor) ReadyAges(ctx context.Context) ([]driver.QueueAge, error) {
	out, err := Collect(ctx, e.db, func(row *sql.Rows) (a driver.QueueAge, err error) {
		var oldest int64
		err = row.Scan(&a.Queue, &oldest)
		a.OldestReady = FromMicros(oldest)
		return a, err
	}, e.q.ReadyAges)
	if err != nil {
		return nil, fmt.Errorf("read ready ages: %w", err)
	}
	return out, nil
}

func (e *Executor) GroupStats(ctx context.Context, max int) ([]driver.GroupStats, error) {
	out, err := Collect(ctx, e.db, func(row *sql.Rows) (g driver.GroupStats, err error) {
		err = row.Scan(&g.Group, &g.Keys, &g.MinLimit, &g.MaxLimit, &g.Active, &g.Blocked, &g.Saturated)
		return g, err
	}, e.q.GroupStats, max)
	if err != nil {
		return nil, fmt.Errorf("sum semaphores by group: %w", err)
	}
	return out, nil
}

func (e *Executor) TopBlockedKeys(ctx context.Context, max int) ([]driver.Semaphore, error) {
	out, err := Collect(ctx, e.db, scanSemaphore, e.q.TopBlockedKeys, max)
	if err != nil {
		return nil, fmt.Errorf("list keys with blocked jobs: %w", err)
	}
	return out, nil
}

func (e *Executor) ReadSemaphore(ctx context.Context, key string) (driver.Semaphore, bool, error) {
	s := driver.Semaphore{Key: key}
	var durMS, expires int64
	ok, err := found(e.db.QueryRowContext(ctx, e.q.ReadSem, e.d.KeyArgs(key)...).Scan(&s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &expires))
	if err != nil {
		return s, false, fmt.Errorf("read semaphore %q: %w", key, err)
	}
	s.Duration, s.ExpiresAt = fromMillis(durMS), FromMicros(expires)
	return s, ok, nil
}

func (e *Executor) KeyHolders(ctx context.Context, key string, max int) ([]driver.Holder, error) {
	out, err := Collect(ctx, e.db, func(row *sql.Rows) (h driver.Holder, err error) {
		var beat, claimed sql.NullInt64
		err = row.Scan(&h.JobID, &h.Kind, &h.Queue, &h.Running, &h.ProcessID, &h.ProcessName, &beat, &claimed)
		h.ProcessBeat, h.ClaimedAt = optMicros(beat), optMicros(claimed)
		return h, err
	}, e.q.KeyHolders, append(e.key(key), e.key(key, max)...)...)
	if err != nil {
		return nil, fmt.Errorf("list holders of %q: %w", key, err)
	}
	return out, nil
}

func (e *Executor) BlockedAhead(ctx context.Context, key string, priority int, jobID int64, max int) (int, error) {
	var n int
	if err := e.db.QueryRowContext(ctx, e.q.BlockedAhead, e.key(key, priority, priority, jobID, max)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count blocked jobs ahead of job %d: %w", jobID, err)
	}
	return n, nil
}

func (e *Executor) BlockedLine(ctx context.Context, key string, max int) ([]driver.BlockedJob, error) {
	out, err := Collect(ctx, e.db, func(row *sql.Rows) (b driver.BlockedJob, err error) {
		var since int64
		err = row.Scan(&b.JobID, &b.Kind, &b.Queue, &b.Priority, &since)
		b.Since = FromMicros(since)
		return b, err
	}, e.q.BlockedLine, e.key(key, max)...)
	if err != nil {
		return nil, fmt.Errorf("list blocked jobs of %q: %w", key, err)
	}
	return out, nil
}

func (e *Executor) JobExecution(ctx context.Context, id int64) (driver.ExecutionDetail, bool, error) {
	var x driver.ExecutionDetail
	var ready, blocked, due, claimed, failed, beat, cancel sql.NullInt64
	ok, err := found(e.db.QueryRowContext(ctx, e.q.JobExecution, id).Scan(&ready, &blocked, &due, &claimed, &failed,
		&x.ProcessID, &x.ProcessName, &beat, &cancel))
	if err != nil {
		return x, false, fmt.Errorf("read execution of job %d: %w", id, err)
	}
	if !ok {
		return x, false, nil
	}
	x.ReadySince, x.BlockedSince, x.DueAt = optMicros(ready), optMicros(blocked), optMicros(due)
	x.ClaimedAt, x.FailedAt, x.ProcessBeat = optMicros(claimed), optMicros(failed), optMicros(beat)
	x.CancelRequestedAt = optMicros(cancel)
	return x, true, nil
}

func (e *Executor) ListFailed(ctx context.Context, before int64, max int) ([]driver.FailedJob, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	out, err := Collect(ctx, e.db, func(row *sql.Rows) (f driver.FailedJob, err error) {
		var failedAt int64
		err = row.Scan(&f.JobID, &f.Kind, &f.Queue, &f.Key, &f.Attempt, &f.Error, &failedAt)
		f.FailedAt = FromMicros(failedAt)
		return f, err
	}, e.q.ListFailed, before, max)
	if err != nil {
		return nil, fmt.Errorf("list failed jobs: %w", err)
	}
	return out, nil
}

func (e *Executor) DeleteFailed(ctx context.Context, jobID int64) (bool, error) {
	n, err := e.exec(ctx, e.q.DeleteFailed, jobID)
	if err != nil {
		return false, fmt.Errorf("delete failed execution of job %d: %w", jobID, err)
	}
	return n == 1, nil
}
