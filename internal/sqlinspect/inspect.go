// Package sqlinspect reads bq's inspection views (Health, Explain, the
// dashboard) through database/sql, for the drivers that store times as
// Unix microseconds: SQLite and MySQL. Each driver supplies its own SQL
// and how a full key is looked up.
package sqlinspect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// DB is what *sql.DB and *sql.Tx have in common for reading.
type DB interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Queries are a driver's inspection statements. Those that name a key
// take Key(key)'s arguments first; BlockedAhead then takes the priority
// twice, the job id and how many rows to count at most.
type Queries struct {
	ReadyAges, GroupStats, TopBlockedKeys, ReadSem, KeyHolders string
	BlockedAhead, BlockedLine, JobExecution, ListFailed        string
}

// Statements both dialects spell alike, with {p} for the table prefix.
const (
	JobExecutionSQL = `
SELECT r.created_at, b.created_at, s.scheduled_at, c.claimed_at, f.failed_at,
	coalesce(c.process_id, 0), coalesce(p.name, ''), p.last_heartbeat_at
FROM {p}jobs j
LEFT JOIN {p}ready_executions r ON r.job_id = j.id
LEFT JOIN {p}blocked_executions b ON b.job_id = j.id
LEFT JOIN {p}scheduled_executions s ON s.job_id = j.id
LEFT JOIN {p}claimed_executions c ON c.job_id = j.id
LEFT JOIN {p}failed_executions f ON f.job_id = j.id
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE j.id = ?`
	ListFailedSQL = `
SELECT f.job_id, j.kind, f.queue, coalesce(j.concurrency_key, ''), j.attempt, f.error, f.failed_at
FROM {p}failed_executions f JOIN {p}jobs j ON j.id = f.job_id
WHERE f.job_id < ?
ORDER BY f.job_id DESC LIMIT ?`
)

// Reader runs one driver's inspection statements.
type Reader struct {
	DB  DB
	Q   *Queries
	Key func(key string) []any // the arguments that look a full key up
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us) }

// collect scans every row of query with scan.
func collect[T any](ctx context.Context, r Reader, scan func(*sql.Rows) (T, error), query string, args ...any) ([]T, error) {
	rows, err := r.DB.QueryContext(ctx, query, args...)
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

func (r Reader) ReadyAges(ctx context.Context) ([]driver.QueueAge, error) {
	out, err := collect(ctx, r, func(row *sql.Rows) (a driver.QueueAge, err error) {
		var oldest int64
		err = row.Scan(&a.Queue, &oldest)
		a.OldestReady = fromMicros(oldest)
		return a, err
	}, r.Q.ReadyAges)
	if err != nil {
		return nil, fmt.Errorf("read ready ages: %w", err)
	}
	return out, nil
}

func (r Reader) GroupStats(ctx context.Context, max int) ([]driver.GroupStats, error) {
	out, err := collect(ctx, r, func(row *sql.Rows) (g driver.GroupStats, err error) {
		err = row.Scan(&g.Group, &g.Keys, &g.MinLimit, &g.MaxLimit, &g.Active, &g.Blocked, &g.Saturated)
		return g, err
	}, r.Q.GroupStats, max)
	if err != nil {
		return nil, fmt.Errorf("sum semaphores by group: %w", err)
	}
	return out, nil
}

func (r Reader) TopBlockedKeys(ctx context.Context, max int) ([]driver.Semaphore, error) {
	out, err := collect(ctx, r, scanSemaphore, r.Q.TopBlockedKeys, max)
	if err != nil {
		return nil, fmt.Errorf("list keys with blocked jobs: %w", err)
	}
	return out, nil
}

func (r Reader) ReadSemaphore(ctx context.Context, key string) (driver.Semaphore, bool, error) {
	s := driver.Semaphore{Key: key}
	var durMS, expires int64
	err := r.DB.QueryRowContext(ctx, r.Q.ReadSem, r.Key(key)...).Scan(&s.Value, &s.Limit, &s.Blocked, &durMS, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("read semaphore %q: %w", key, err)
	}
	s.Duration, s.ExpiresAt = time.Duration(durMS)*time.Millisecond, fromMicros(expires)
	return s, true, nil
}

func (r Reader) KeyHolders(ctx context.Context, key string, max int) ([]driver.Holder, error) {
	out, err := collect(ctx, r, func(row *sql.Rows) (h driver.Holder, err error) {
		var beat, claimed sql.NullInt64
		err = row.Scan(&h.JobID, &h.Kind, &h.Queue, &h.Running, &h.ProcessID, &h.ProcessName, &beat, &claimed)
		h.ProcessBeat, h.ClaimedAt = optMicros(beat), optMicros(claimed)
		return h, err
	}, r.Q.KeyHolders, append(r.Key(key), max)...)
	if err != nil {
		return nil, fmt.Errorf("list holders of %q: %w", key, err)
	}
	return out, nil
}

func (r Reader) BlockedAhead(ctx context.Context, key string, priority int, jobID int64, max int) (int, error) {
	var n int
	if err := r.DB.QueryRowContext(ctx, r.Q.BlockedAhead, append(r.Key(key), priority, priority, jobID, max)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count blocked jobs ahead of job %d: %w", jobID, err)
	}
	return n, nil
}

func (r Reader) BlockedLine(ctx context.Context, key string, max int) ([]driver.BlockedJob, error) {
	out, err := collect(ctx, r, func(row *sql.Rows) (b driver.BlockedJob, err error) {
		var since int64
		err = row.Scan(&b.JobID, &b.Kind, &b.Queue, &b.Priority, &since)
		b.Since = fromMicros(since)
		return b, err
	}, r.Q.BlockedLine, append(r.Key(key), max)...)
	if err != nil {
		return nil, fmt.Errorf("list blocked jobs of %q: %w", key, err)
	}
	return out, nil
}

func (r Reader) JobExecution(ctx context.Context, id int64) (driver.ExecutionDetail, bool, error) {
	var x driver.ExecutionDetail
	var ready, blocked, due, claimed, failed, beat sql.NullInt64
	err := r.DB.QueryRowContext(ctx, r.Q.JobExecution, id).Scan(&ready, &blocked, &due, &claimed, &failed,
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

func (r Reader) ListFailed(ctx context.Context, before int64, max int) ([]driver.FailedJob, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	out, err := collect(ctx, r, func(row *sql.Rows) (f driver.FailedJob, err error) {
		var failedAt int64
		err = row.Scan(&f.JobID, &f.Kind, &f.Queue, &f.Key, &f.Attempt, &f.Error, &failedAt)
		f.FailedAt = fromMicros(failedAt)
		return f, err
	}, r.Q.ListFailed, before, max)
	if err != nil {
		return nil, fmt.Errorf("list failed jobs: %w", err)
	}
	return out, nil
}
