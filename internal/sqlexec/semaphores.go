package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// key returns key's lookup arguments (KeyArgs), then more.
func (e *Executor) key(key string, more ...any) []any {
	return append(e.d.KeyArgs(key), more...)
}

// SemColumns are what SemaphoreLock reads of semaphore s, in the order
// it scans them, and what AdmitQueries.Lock reads after at: the row, the
// key's override and adaptive limit (the key_limits and key_adapt rows
// whose keyColumn, "key" or "key_hash", is s's) and the policy of the
// queue that queue names ("?" or a column); row names more of s's
// columns, read after expires_at. The subqueries lock nothing in a
// locking read: only the semaphore row is locked.
func SemColumns(keyColumn, queue, row string) string {
	k, q := keyColumn, queue
	return `s.value, s.lim, s.blocked, s.multi, s.duration_ms, s.expires_at, ` + row + `,
	coalesce((SELECT k.lim FROM {p}key_limits k WHERE k.` + k + ` = s.` + k + `), 0),
	coalesce((SELECT a.lim FROM {p}key_adapt a WHERE a.` + k + ` = s.` + k + `), 0),
	coalesce((SELECT p.queue FROM {p}policies p WHERE p.queue = ` + q + `), ''),
	coalesce((SELECT p.max_active_per_key FROM {p}policies p WHERE p.queue = ` + q + `), 0),
	coalesce((SELECT p.max_blocked FROM {p}policies p WHERE p.queue = ` + q + `), 0),
	coalesce((SELECT p.max_wait_us FROM {p}policies p WHERE p.queue = ` + q + `), 0),
	coalesce((SELECT p.adaptive_min FROM {p}policies p WHERE p.queue = ` + q + `), 0)`
}

func (e *Executor) SemaphoreEnsure(ctx context.Context, l driver.Limit, now time.Time) error {
	if err := e.d.CheckKey(l.Key); err != nil {
		return fmt.Errorf("create semaphore: %w", err)
	}
	to := max(l.To, 1)
	if _, err := e.exec(ctx, e.q.SemEnsure, e.key(l.Key, to, to, l.Duration.Milliseconds(), Micros(now.Add(l.Duration)))...); err != nil {
		return fmt.Errorf("create semaphore %q: %w", l.Key, err)
	}
	return nil
}

// SemaphoreLock reads the row with a locking read (FOR UPDATE; outside a
// transaction the lock ends with the statement), or, on a single writer,
// a plain one: the write lock its transaction holds is the lock. The row
// is locked first, in a statement of its own (SemLockRow), and read in
// the next: a read that waited for the lock in its own statement would
// take the key's override and adaptive limit from the snapshot it began
// with, not as the transaction it waited for left them.
func (e *Executor) SemaphoreLock(ctx context.Context, key, queue string) (driver.Semaphore, bool, error) {
	s := driver.Semaphore{Key: key, Timed: true}
	var durMS, expires, intervalUS, waitUS int64
	var last sql.NullInt64
	q := e.d.Text(queue)
	if e.q.SemLockRow != "" {
		var one int
		if _, err := found(e.db.QueryRowContext(ctx, e.q.SemLockRow, e.d.KeyArgs(key)...).Scan(&one)); err != nil {
			return s, false, fmt.Errorf("lock semaphore %q: %w", key, err)
		}
	}
	ok, err := found(e.db.QueryRowContext(ctx, e.q.SemLock, append([]any{q, q, q, q, q}, e.d.KeyArgs(key)...)...).Scan(&s.Value,
		&s.Limit, &s.Blocked, &s.Multi, &durMS, &expires, &intervalUS, &last,
		&s.Override, &s.Adapt, &s.Policy.Queue, &s.Policy.MaxActivePerKey, &s.Policy.MaxBlocked, &waitUS, &s.Policy.AdaptiveMin))
	if err != nil {
		return s, false, fmt.Errorf("lock semaphore %q: %w", key, err)
	}
	s.Policy.MaxWait = time.Duration(waitUS) * time.Microsecond
	s.Duration, s.ExpiresAt = fromMillis(durMS), FromMicros(expires)
	s.Interval, s.LastRelease = time.Duration(intervalUS)*time.Microsecond, optMicros(last)
	return s, ok, nil
}

func (e *Executor) SemaphoreTryLock(ctx context.Context, key string) (bool, error) {
	var one int
	ok, err := found(e.db.QueryRowContext(ctx, e.q.SemTryLock, e.d.KeyArgs(key)...).Scan(&one))
	if err != nil {
		return false, fmt.Errorf("lock semaphore %q: %w", key, err)
	}
	return ok, nil
}

func (e *Executor) SemaphoreSave(ctx context.Context, s driver.Semaphore) error {
	timed := 0
	if s.Timed {
		timed = 1
	}
	_, err := e.exec(ctx, e.q.SemSave, s.Value, s.Limit, s.Blocked, s.Multi, s.Duration.Milliseconds(), Micros(s.ExpiresAt),
		timed, s.Interval.Microseconds(), timed, lastMicros(s.LastRelease), e.d.KeyIndex(s.Key))
	if err != nil {
		return fmt.Errorf("save semaphore %q: %w", s.Key, err)
	}
	return nil
}

func (e *Executor) LinePromote(ctx context.Context, key string, n int, now time.Time) (driver.Promotion, error) {
	var moved driver.Promotion
	err := e.Atomic(ctx, func(x *Executor) error {
		moved = driver.Promotion{}
		// Callers hold the key's semaphore lock, which every writer of the
		// key's blocked rows takes first: a plain read is stable.
		picked, err := Collect(ctx, x.db, func(rows *sql.Rows) (r driver.Execution, err error) {
			r = driver.Execution{Key: key, At: now}
			err = rows.Scan(&r.JobID, &r.Queue, &r.Priority)
			return r, err
		}, x.q.PickBlocked, x.d.KeyIndex(key), n)
		if err != nil || len(picked) == 0 {
			return err
		}
		ids := make([]int64, len(picked))
		for i, r := range picked {
			ids[i] = r.JobID
		}
		deleted, err := ExecIn(ctx, x, x.q.DeleteBlocked, ids)
		if err != nil {
			return err
		}
		if deleted != int64(len(picked)) {
			return fmt.Errorf("%d of %d blocked rows vanished under the semaphore lock", int64(len(picked))-deleted, len(picked))
		}
		if err := x.insertExecutions(ctx, driver.StateReady, picked); err != nil {
			return err
		}
		for _, r := range picked {
			moved.Jobs++
			moved.AddQueue(r.Queue)
			moved.JobIDs = append(moved.JobIDs, r.JobID)
		}
		return nil
	})
	if err != nil {
		return driver.Promotion{}, fmt.Errorf("promote blocked jobs of %q: %w", key, err)
	}
	return moved, nil
}

// HolderCount passes the key's KeyIndex to each of the statement's
// eight places.
func (e *Executor) HolderCount(ctx context.Context, key string) (driver.HolderCount, error) {
	var n driver.HolderCount
	k := e.d.KeyIndex(key)
	if err := e.db.QueryRowContext(ctx, e.q.CountHolders, k, k, k, k, k, k, k, k).Scan(&n.Holders, &n.Blocked, &n.Multi); err != nil {
		return driver.HolderCount{}, fmt.Errorf("count holders of %q: %w", key, err)
	}
	return n, nil
}

// ScanLineHead scans a row of LineListHeads' columns, after the columns
// read into before.
func ScanLineHead(scan func(...any) error, h *driver.LineHead, before ...any) error {
	var j driver.Job
	var durMS int64
	var conflict int
	var more []byte
	if err := scan(append(before, &h.JobID, &h.Queue, &h.Priority, &j.Limit.Key, &j.Limit.To, &durMS, &conflict,
		&j.Limit.MaxBlocked, &more, &h.Slots)...); err != nil {
		return err
	}
	j.Limit.Duration, j.Limit.OnConflict = fromMillis(durMS), driver.OnConflict(conflict)
	var err error
	if j.More, err = driver.DecodeMore(more); err != nil {
		return err
	}
	h.Keys = j.Keys()
	return nil
}

func (e *Executor) LineListHeads(ctx context.Context, key string, n int) ([]driver.LineHead, error) {
	out, err := Collect(ctx, e.db, func(rows *sql.Rows) (h driver.LineHead, err error) {
		return h, ScanLineHead(rows.Scan, &h)
	}, e.q.LineHeads, e.d.KeyIndex(key), n)
	if err != nil {
		return nil, fmt.Errorf("read the head of the line of %q: %w", key, err)
	}
	return out, nil
}

func (e *Executor) LineMove(ctx context.Context, id int64, from, to string) error {
	if err := e.d.CheckKey(to); err != nil {
		return fmt.Errorf("move job %d to the line of %q: %w", id, to, err)
	}
	n, err := e.exec(ctx, e.q.MoveToLine, e.d.Text(to), id, e.d.Text(from))
	if err != nil {
		return fmt.Errorf("move job %d from the line of %q to that of %q: %w", id, from, to, err)
	}
	if n == 0 {
		return fmt.Errorf("move job %d from the line of %q to that of %q: it is not blocked in the line of %q", id, from, to, from)
	}
	return nil
}

func (e *Executor) keys(ctx context.Context, what, query string, args ...any) ([]string, error) {
	keys, err := Column[string](ctx, e.db, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s semaphores: %w", what, err)
	}
	return keys, nil
}

func (e *Executor) SemaphoreListExpired(ctx context.Context, now time.Time, after string, max int) ([]string, error) {
	return e.keys(ctx, "expired", e.q.ExpiredSems, Micros(now), e.d.Text(after), max)
}

func (e *Executor) SemaphoreList(ctx context.Context, after string, max int) ([]string, error) {
	return e.keys(ctx, "all", e.q.AllSems, e.d.Text(after), max)
}

func (e *Executor) SemaphoreListPromotable(ctx context.Context, after string, max int) ([]string, error) {
	return e.keys(ctx, "promotable", e.q.PromotableSems, e.d.Text(after), max)
}

// SemaphoreDeleteIdle picks idle semaphores (with a locking read that
// skips rows others hold, where there are row locks), then deletes those
// picked by their index.
func (e *Executor) SemaphoreDeleteIdle(ctx context.Context, now time.Time, max int) (int, error) {
	var n int64
	err := e.Atomic(ctx, func(x *Executor) error {
		n = 0
		idle, err := Column[any](ctx, x.db, x.q.PickIdleSems, Micros(now), max)
		if err != nil || len(idle) == 0 {
			return err
		}
		n, err = ExecIn(ctx, x, x.q.DeleteSems, idle)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete idle semaphores: %w", err)
	}
	return int(n), nil
}
