package sqlexec

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// The inspection statements: read-only, for Health, Explain and the UI.

// key is the arguments that look key up, then more.
func (s Shared) key(key string, more ...any) []any { return append(s.c.KeyArgs(key), more...) }

func (s Shared) JobCountByQueue(ctx context.Context) ([]driver.QueueCounts, error) {
	out, err := collect(ctx, s.c, func(r Row) (c driver.QueueCounts, err error) {
		err = r.Scan(&c.Queue, &c.Ready, &c.Running, &c.Scheduled, &c.Blocked, &c.Failed, &c.Waiting)
		return c, err
	}, s.q.CountByQueue)
	if err != nil {
		return nil, fmt.Errorf("count jobs by queue: %w", err)
	}
	return out, nil
}

func (s Shared) ClockNow(ctx context.Context) (time.Time, error) {
	if s.q.ClockNow == "" {
		return time.Time{}, nil
	}
	var t time.Time
	if err := s.c.QueryRow(ctx, s.q.ClockNow).Scan(At(&t)); err != nil {
		return time.Time{}, fmt.Errorf("read the database's clock: %w", err)
	}
	return t, nil
}

func (s Shared) SchemaVersion(ctx context.Context) (int64, error) {
	var v int64
	err := s.c.QueryRow(ctx, s.q.SchemaVersion).Scan(&v)
	if err != nil && s.c.NoTable(err) {
		return 0, nil // never migrated
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

func (s Shared) ReadyListAges(ctx context.Context) ([]driver.QueueAge, error) {
	out, err := collect(ctx, s.c, func(r Row) (a driver.QueueAge, err error) {
		err = r.Scan(&a.Queue, At(&a.OldestReady))
		return a, err
	}, s.q.ReadyAges)
	if err != nil {
		return nil, fmt.Errorf("read ready ages: %w", err)
	}
	return out, nil
}

func (s Shared) GroupListStats(ctx context.Context, max int) ([]driver.GroupStats, error) {
	out, err := collect(ctx, s.c, func(r Row) (g driver.GroupStats, err error) {
		err = r.Scan(&g.Group, &g.Keys, &g.MinLimit, &g.MaxLimit, &g.Active, &g.Blocked, &g.Saturated)
		return g, err
	}, s.q.GroupStats, max)
	if err != nil {
		return nil, fmt.Errorf("sum semaphores by group: %w", err)
	}
	return out, nil
}

func (s Shared) SemaphoreListMostBlocked(ctx context.Context, max int) ([]driver.Semaphore, error) {
	out, err := collect(ctx, s.c, func(r Row) (s driver.Semaphore, err error) {
		var durMS, intervalUS int64
		err = r.Scan(&s.Key, &s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, At(&s.ExpiresAt), &intervalUS)
		s.Duration, s.Interval = fromMillis(durMS), time.Duration(intervalUS)*time.Microsecond
		return s, err
	}, s.q.TopBlockedKeys, max)
	if err != nil {
		return nil, fmt.Errorf("list keys with blocked jobs: %w", err)
	}
	return out, nil
}

// scanSemaphore reads key, value, lim, blocked, multi, duration_ms, expires_at.
func scanSemaphore(r Row) (s driver.Semaphore, err error) {
	var durMS int64
	err = r.Scan(&s.Key, &s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, At(&s.ExpiresAt))
	s.Duration = fromMillis(durMS)
	return s, err
}

var _ driver.KeySearcher = Shared{}

// KeySearch lists, in key order, up to max semaphores whose keys start
// with prefix and end with suffix, matched byte for byte.
func (s Shared) KeySearch(ctx context.Context, prefix, suffix string, max int) ([]driver.Semaphore, error) {
	query, pattern := s.c.SearchKeys(prefix, suffix)
	out, err := collect(ctx, s.c, scanSemaphore, query, pattern, max)
	if err != nil {
		return nil, fmt.Errorf("search keys: %w", err)
	}
	return out, nil
}

func (s Shared) SemaphoreGet(ctx context.Context, key string) (driver.Semaphore, bool, error) {
	sem := driver.Semaphore{Key: key}
	var durMS, intervalUS int64
	ok, err := found(s.c.QueryRow(ctx, s.q.ReadSem, s.c.KeyArgs(key)...).Scan(&sem.Value, &sem.Limit, &sem.Blocked,
		&sem.Multi, &durMS, At(&sem.ExpiresAt), &intervalUS))
	if err != nil {
		return sem, false, fmt.Errorf("read semaphore %q: %w", key, err)
	}
	sem.Duration, sem.Interval = fromMillis(durMS), time.Duration(intervalUS)*time.Microsecond
	return sem, ok, nil
}

func (s Shared) HolderList(ctx context.Context, key string, max int) ([]driver.Holder, error) {
	out, err := collect(ctx, s.c, func(r Row) (h driver.Holder, err error) {
		err = r.Scan(&h.JobID, &h.Kind, &h.Queue, &h.Running, &h.ProcessID, &h.ProcessName, At(&h.ProcessBeat), At(&h.ClaimedAt), &h.Held)
		return h, err
	}, s.q.KeyHolders, append(s.key(key), s.key(key, max)...)...)
	if err != nil {
		return nil, fmt.Errorf("list holders of %q: %w", key, err)
	}
	return out, nil
}

func (s Shared) LineCountAhead(ctx context.Context, p driver.LineAheadParams) (int, error) {
	key, priority, jobID, max := p.Key, p.Priority, p.JobID, p.Max
	var n int
	if err := s.c.QueryRow(ctx, s.q.BlockedAhead, s.key(key, priority, priority, jobID, max)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count blocked jobs ahead of job %d: %w", jobID, err)
	}
	return n, nil
}

func (s Shared) LineList(ctx context.Context, key string, max int) ([]driver.BlockedJob, error) {
	out, err := collect(ctx, s.c, func(r Row) (b driver.BlockedJob, err error) {
		err = r.Scan(&b.JobID, &b.Kind, &b.Queue, &b.Priority, At(&b.Since))
		return b, err
	}, s.q.BlockedLine, s.key(key, max)...)
	if err != nil {
		return nil, fmt.Errorf("list blocked jobs of %q: %w", key, err)
	}
	return out, nil
}

func (s Shared) ExecutionGet(ctx context.Context, id int64) (driver.ExecutionDetail, bool, error) {
	var x driver.ExecutionDetail
	ok, err := found(s.c.QueryRow(ctx, s.q.JobExecution, id).Scan(At(&x.ReadySince), At(&x.BlockedSince), At(&x.DueAt),
		At(&x.ClaimedAt), At(&x.FailedAt), &x.ProcessID, &x.ProcessName, At(&x.ProcessBeat), At(&x.CancelRequestedAt), &x.Fence))
	if err != nil {
		return driver.ExecutionDetail{}, false, fmt.Errorf("read execution of job %d: %w", id, err)
	}
	if !ok {
		return driver.ExecutionDetail{}, false, nil
	}
	return x, true, nil
}

func (s Shared) JobListStranded(ctx context.Context, after int64, max int) ([]driver.StrandedJob, error) {
	out, err := collect(ctx, s.c, func(r Row) (j driver.StrandedJob, err error) {
		err = r.Scan(&j.ID, &j.StateRows)
		return j, err
	}, s.q.StrandedJobs, after, max)
	if err != nil {
		return nil, fmt.Errorf("list jobs in no state or in several: %w", err)
	}
	return out, nil
}

func (s Shared) FailedList(ctx context.Context, before int64, max int) ([]driver.FailedJob, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	out, err := collect(ctx, s.c, func(r Row) (f driver.FailedJob, err error) {
		err = r.Scan(&f.JobID, &f.Kind, &f.Queue, &f.Key, &f.Attempt, &f.Error, At(&f.FailedAt))
		return f, err
	}, s.q.ListFailed, before, max)
	if err != nil {
		return nil, fmt.Errorf("list failed jobs: %w", err)
	}
	return out, nil
}
