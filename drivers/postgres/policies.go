package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
)

func (e *executor) policies(ctx context.Context, query string, args ...any) ([]driver.Policy, error) {
	return collect(ctx, e.db, func(r pgx.CollectableRow) (p driver.Policy, err error) {
		var periodMS int64
		err = r.Scan(&p.Queue, &p.Namespace, &p.MaxActive, &p.MaxActivePerKey, &p.MaxBlocked, &p.MaxStartsPerKey, &periodMS,
			&p.CreatedAt, &p.UpdatedAt)
		p.StartsPeriod = time.Duration(periodMS) * time.Millisecond
		return p, err
	}, query, args...)
}

func (e *executor) LockPolicies(ctx context.Context, namespace string, queues []string) ([]driver.Policy, error) {
	out, err := e.policies(ctx, e.q.lockPolicies, namespace, queues)
	if err != nil {
		return nil, fmt.Errorf("lock policies: %w", err)
	}
	return out, nil
}

func (e *executor) ListPolicies(ctx context.Context) ([]driver.Policy, error) {
	out, err := e.policies(ctx, e.q.listPolicies)
	if err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	return out, nil
}

func (e *executor) InsertPolicy(ctx context.Context, p driver.Policy) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.insertPolicy, p.Queue, p.Namespace, p.MaxActive, p.MaxActivePerKey, p.MaxBlocked,
		p.MaxStartsPerKey, p.StartsPeriod.Milliseconds(), p.UpdatedAt)
	if err != nil {
		return false, fmt.Errorf("insert policy of queue %q: %w", p.Queue, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) UpdatePolicy(ctx context.Context, p driver.Policy) error {
	if _, err := e.db.Exec(ctx, e.q.updatePolicy, p.Queue, p.MaxActive, p.MaxActivePerKey, p.MaxBlocked,
		p.MaxStartsPerKey, p.StartsPeriod.Milliseconds(), p.UpdatedAt); err != nil {
		return fmt.Errorf("update policy of queue %q: %w", p.Queue, err)
	}
	return nil
}

func (e *executor) DeletePolicy(ctx context.Context, queue string) error {
	if _, err := e.db.Exec(ctx, e.q.deletePolicy, queue); err != nil {
		return fmt.Errorf("delete policy of queue %q: %w", queue, err)
	}
	return nil
}

func (e *executor) PolicyKeys(ctx context.Context, queue string) ([]string, error) {
	return e.keys(ctx, "policy-limited", e.q.policyKeys, queue)
}

func (e *executor) PolicyRateKeys(ctx context.Context, queue string) ([]string, error) {
	return e.keys(ctx, "policy-rated", e.q.policyRateKeys, queue)
}

func (e *executor) PolicyRate(ctx context.Context, queue string) (driver.RateSpec, error) {
	var s driver.RateSpec
	var periodMS int64
	if _, err := found(e.db.QueryRow(ctx, e.q.policyRate, queue).Scan(&s.Limit, &periodMS)); err != nil {
		return driver.RateSpec{}, fmt.Errorf("read the policy rate of queue %q: %w", queue, err)
	}
	s.Period = time.Duration(periodMS) * time.Millisecond
	return s, nil
}

func (e *executor) SetKeyLimit(ctx context.Context, key string, limit int, now time.Time) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("set key limit: %w", err)
	}
	if _, err := e.db.Exec(ctx, e.q.setKeyLimit, key, limit, now); err != nil {
		return fmt.Errorf("set limit of key %q: %w", key, err)
	}
	return nil
}

func (e *executor) DeleteKeyLimit(ctx context.Context, key string) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteKeyLimit, key)
	if err != nil {
		return false, fmt.Errorf("clear limit of key %q: %w", key, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) LatestJobLimit(ctx context.Context, key string) (driver.Limit, string, bool, error) {
	var j driver.Job
	ok, err := found(scanJob(e.db.QueryRow(ctx, e.q.latestJobLimit, key), &j))
	if err != nil {
		return driver.Limit{}, "", false, fmt.Errorf("read the newest job of key %q: %w", key, err)
	}
	if !ok {
		return driver.Limit{}, "", false, nil
	}
	// A multi-key job may name the key among its More.
	for _, l := range j.Keys() {
		if l.Key == key {
			return l, j.Queue, true, nil
		}
	}
	return driver.Limit{}, "", false, fmt.Errorf("read the newest job of key %q: job %d does not name it", key, j.ID)
}
