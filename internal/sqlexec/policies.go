package sqlexec

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (s Shared) policies(ctx context.Context, query string, args ...any) ([]driver.Policy, error) {
	return collect(ctx, s.c, func(r Row) (p driver.Policy, err error) {
		var periodMS, waitUS int64
		err = r.Scan(&p.Queue, &p.Namespace, &p.MaxActive, &p.MaxActivePerKey, &p.MaxBlocked, &p.MaxStartsPerKey, &periodMS,
			&p.FairShare, &p.KeyWeight, &waitUS, &p.AdaptiveMin, At(&p.CreatedAt), At(&p.UpdatedAt))
		p.StartsPeriod, p.MaxWait = fromMillis(periodMS), time.Duration(waitUS)*time.Microsecond
		return p, err
	}, query, args...)
}

// PolicyLockMany locks the rows it reads (FOR UPDATE); on a single writer
// the write transaction is the lock.
func (s Shared) PolicyLockMany(ctx context.Context, namespace string, queues []string) ([]driver.Policy, error) {
	query, args := s.c.Names(s.q.LockPolicies, queues)
	out, err := s.policies(ctx, query, append([]any{s.c.Text(namespace)}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("lock policies: %w", err)
	}
	return out, nil
}

func (s Shared) PolicyList(ctx context.Context) ([]driver.Policy, error) {
	out, err := s.policies(ctx, s.q.ListPolicies)
	if err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	return out, nil
}

func (s Shared) PolicyInsert(ctx context.Context, p driver.Policy) (bool, error) {
	n, err := s.c.Write(ctx, s.q.InsertPolicy, s.c.Text(p.Queue), s.c.Text(p.Namespace), p.MaxActive, p.MaxActivePerKey,
		p.MaxBlocked, p.MaxStartsPerKey, p.StartsPeriod.Milliseconds(), p.FairShare, p.KeyWeight,
		p.MaxWait.Microseconds(), p.AdaptiveMin, s.c.Time(p.UpdatedAt), s.c.Time(p.UpdatedAt))
	if err != nil {
		return false, fmt.Errorf("insert policy of queue %q: %w", p.Queue, err)
	}
	return n == 1, nil
}

func (s Shared) PolicyUpdate(ctx context.Context, p driver.Policy) error {
	if _, err := s.c.Write(ctx, s.q.UpdatePolicy, p.MaxActive, p.MaxActivePerKey, p.MaxBlocked,
		p.MaxStartsPerKey, p.StartsPeriod.Milliseconds(), p.FairShare, p.KeyWeight, p.MaxWait.Microseconds(),
		p.AdaptiveMin, s.c.Time(p.UpdatedAt), s.c.Text(p.Queue)); err != nil {
		return fmt.Errorf("update policy of queue %q: %w", p.Queue, err)
	}
	return nil
}

func (s Shared) PolicyDelete(ctx context.Context, queue string) error {
	if _, err := s.c.Write(ctx, s.q.DeletePolicy, s.c.Text(queue)); err != nil {
		return fmt.Errorf("delete policy of queue %q: %w", queue, err)
	}
	return nil
}

func (s Shared) PolicyListRateKeys(ctx context.Context, queue string) ([]string, error) {
	keys, err := collect(ctx, s.c, func(r Row) (k string, err error) {
		err = r.Scan(&k)
		return k, err
	}, s.q.PolicyRateKeys, s.c.Text(queue))
	if err != nil {
		return nil, fmt.Errorf("list policy-rated keys of queue %q: %w", queue, err)
	}
	return keys, nil
}

func (s Shared) PolicyGetRate(ctx context.Context, queue string) (driver.RateSpec, error) {
	var r driver.RateSpec
	var periodMS int64
	if _, err := found(s.c.QueryRow(ctx, s.q.PolicyRate, s.c.Text(queue)).Scan(&r.Limit, &periodMS)); err != nil {
		return driver.RateSpec{}, fmt.Errorf("read the policy rate of queue %q: %w", queue, err)
	}
	r.Period = fromMillis(periodMS)
	return r, nil
}

func (s Shared) KeyLimitSet(ctx context.Context, key string, limit int, now time.Time) error {
	if err := s.c.CheckKey(key); err != nil {
		return fmt.Errorf("set key limit: %w", err)
	}
	if _, err := s.c.Write(ctx, s.q.SetKeyLimit, append(s.c.KeyArgs(key), limit, s.c.Time(now))...); err != nil {
		return fmt.Errorf("set limit of key %q: %w", key, err)
	}
	return nil
}

func (s Shared) KeyLimitDelete(ctx context.Context, key string) (bool, error) {
	n, err := s.c.Write(ctx, s.q.DeleteKeyLimit, s.c.KeyArgs(key)...)
	if err != nil {
		return false, fmt.Errorf("clear limit of key %q: %w", key, err)
	}
	return n == 1, nil
}

// PolicyListKeys reads the further keys of multi-key jobs (more_keys) in Go;
// PostgreSQL reads them in SQL.
func (e *Executor) PolicyListKeys(ctx context.Context, queue string) ([]string, error) {
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

// JobLimitGetLatest reads the newest job naming the key first, then the
// newest naming it among its further keys; PostgreSQL reads both in one
// statement.
func (e *Executor) JobLimitGetLatest(ctx context.Context, key string) (driver.Limit, string, bool, error) {
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
