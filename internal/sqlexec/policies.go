package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (e *Executor) policies(ctx context.Context, query string, args ...any) ([]driver.Policy, error) {
	return Collect(ctx, e.db, func(rows *sql.Rows) (p driver.Policy, err error) {
		var created, updated, periodMS int64
		err = rows.Scan(&p.Queue, &p.Namespace, &p.MaxActive, &p.MaxActivePerKey, &p.MaxBlocked, &p.MaxStartsPerKey, &periodMS,
			&created, &updated)
		p.CreatedAt, p.UpdatedAt = FromMicros(created), FromMicros(updated)
		p.StartsPeriod = time.Duration(periodMS) * time.Millisecond
		return p, err
	}, query, args...)
}

// LockPolicies locks the rows it reads (FOR UPDATE); on a single writer
// the write transaction is the lock.
func (e *Executor) LockPolicies(ctx context.Context, namespace string, queues []string) ([]driver.Policy, error) {
	names := make([]any, len(queues))
	for i, q := range queues {
		names[i] = e.d.Text(q)
	}
	query, args := in(e, e.q.LockPolicies, names)
	out, err := e.policies(ctx, query, append([]any{e.d.Text(namespace)}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("lock policies: %w", err)
	}
	return out, nil
}

func (e *Executor) ListPolicies(ctx context.Context) ([]driver.Policy, error) {
	out, err := e.policies(ctx, e.q.ListPolicies)
	if err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	return out, nil
}

func (e *Executor) InsertPolicy(ctx context.Context, p driver.Policy) (bool, error) {
	n, err := e.exec(ctx, e.q.InsertPolicy, e.d.Text(p.Queue), e.d.Text(p.Namespace), p.MaxActive, p.MaxActivePerKey,
		p.MaxBlocked, p.MaxStartsPerKey, p.StartsPeriod.Milliseconds(), Micros(p.UpdatedAt), Micros(p.UpdatedAt))
	if err != nil {
		return false, fmt.Errorf("insert policy of queue %q: %w", p.Queue, err)
	}
	return n == 1, nil
}

func (e *Executor) UpdatePolicy(ctx context.Context, p driver.Policy) error {
	if _, err := e.exec(ctx, e.q.UpdatePolicy, p.MaxActive, p.MaxActivePerKey, p.MaxBlocked,
		p.MaxStartsPerKey, p.StartsPeriod.Milliseconds(), Micros(p.UpdatedAt),
		e.d.Text(p.Queue)); err != nil {
		return fmt.Errorf("update policy of queue %q: %w", p.Queue, err)
	}
	return nil
}

func (e *Executor) DeletePolicy(ctx context.Context, queue string) error {
	if _, err := e.exec(ctx, e.q.DeletePolicy, e.d.Text(queue)); err != nil {
		return fmt.Errorf("delete policy of queue %q: %w", queue, err)
	}
	return nil
}

func (e *Executor) PolicyKeys(ctx context.Context, queue string) ([]string, error) {
	keys, err := Column[string](ctx, e.db, e.q.PolicyKeys, e.d.Text(queue))
	if err != nil {
		return nil, fmt.Errorf("list policy-limited keys of queue %q: %w", queue, err)
	}
	// A multi-key job's further keys left to the policy (To 0).
	more, err := Column[[]byte](ctx, e.db, e.q.PolicyMoreKeys, e.d.Text(queue))
	if err != nil {
		return nil, fmt.Errorf("list policy-limited keys of queue %q: %w", queue, err)
	}
	for _, b := range more {
		limits, err := driver.DecodeMore(b)
		if err != nil {
			return nil, err
		}
		for _, l := range limits {
			if l.To == 0 {
				keys = append(keys, l.Key)
			}
		}
	}
	if len(more) > 0 {
		slices.Sort(keys)
		keys = slices.Compact(keys)
	}
	return keys, nil
}

func (e *Executor) PolicyRateKeys(ctx context.Context, queue string) ([]string, error) {
	keys, err := Column[string](ctx, e.db, e.q.PolicyRateKeys, e.d.Text(queue))
	if err != nil {
		return nil, fmt.Errorf("list policy-rated keys of queue %q: %w", queue, err)
	}
	return keys, nil
}

func (e *Executor) PolicyRate(ctx context.Context, queue string) (driver.RateSpec, error) {
	var s driver.RateSpec
	var periodMS int64
	if _, err := found(e.db.QueryRowContext(ctx, e.q.PolicyRate, e.d.Text(queue)).Scan(&s.Limit, &periodMS)); err != nil {
		return driver.RateSpec{}, fmt.Errorf("read the policy rate of queue %q: %w", queue, err)
	}
	s.Period = time.Duration(periodMS) * time.Millisecond
	return s, nil
}

func (e *Executor) SetKeyLimit(ctx context.Context, key string, limit int, now time.Time) error {
	if err := e.d.CheckKey(key); err != nil {
		return fmt.Errorf("set key limit: %w", err)
	}
	if _, err := e.exec(ctx, e.q.SetKeyLimit, e.key(key, limit, Micros(now))...); err != nil {
		return fmt.Errorf("set limit of key %q: %w", key, err)
	}
	return nil
}

func (e *Executor) DeleteKeyLimit(ctx context.Context, key string) (bool, error) {
	n, err := e.exec(ctx, e.q.DeleteKeyLimit, e.d.KeyArgs(key)...)
	if err != nil {
		return false, fmt.Errorf("clear limit of key %q: %w", key, err)
	}
	return n == 1, nil
}

func (e *Executor) LatestJobLimit(ctx context.Context, key string) (driver.Limit, string, bool, error) {
	var j, m driver.Job
	ok, err := found(ScanJob(e.db.QueryRowContext(ctx, e.q.LatestJobLimit, e.d.KeyIndex(key)).Scan, &j))
	if err != nil {
		return driver.Limit{}, "", false, fmt.Errorf("read the newest job of key %q: %w", key, err)
	}
	// The newest job naming it among its further keys may be newer.
	okM, err := found(ScanJob(e.db.QueryRowContext(ctx, e.q.LatestMultiJob, e.d.KeyIndex(key)).Scan, &m))
	if err != nil {
		return driver.Limit{}, "", false, fmt.Errorf("read the newest job of key %q: %w", key, err)
	}
	if okM && (!ok || m.ID > j.ID) {
		for _, l := range m.Keys() {
			if l.Key == key {
				return l, m.Queue, true, nil
			}
		}
	}
	return j.Limit, j.Queue, ok, nil
}
