package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (e *executor) policies(ctx context.Context, query string, args ...any) ([]driver.Policy, error) {
	rows, err := e.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []driver.Policy
	for rows.Next() {
		var p driver.Policy
		var created, updated int64
		if err := rows.Scan(&p.Queue, &p.Namespace, &p.MaxActive, &p.MaxActivePerKey, &p.MaxBlocked, &created, &updated); err != nil {
			return nil, err
		}
		p.CreatedAt, p.UpdatedAt = fromMicros(created), fromMicros(updated)
		out = append(out, p)
	}
	return out, rows.Err()
}

func (e *executor) LockPolicies(ctx context.Context, namespace string, queues []string) ([]driver.Policy, error) {
	args := []any{[]byte(namespace)}
	for _, q := range queues {
		args = append(args, []byte(q))
	}
	// An empty IN list is not SQL: match no queue instead.
	query := in(e.q.lockPolicies, len(queues))
	if len(queues) == 0 {
		query, args = in(e.q.lockPolicies, 1), append(args, nil)
	}
	out, err := e.policies(ctx, query, args...)
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
	n, err := e.exec(ctx, e.q.insertPolicy, []byte(p.Queue), []byte(p.Namespace), p.MaxActive, p.MaxActivePerKey,
		p.MaxBlocked, micros(p.UpdatedAt), micros(p.UpdatedAt))
	if err != nil {
		return false, fmt.Errorf("insert policy of queue %q: %w", p.Queue, err)
	}
	return n == 1, nil
}

func (e *executor) UpdatePolicy(ctx context.Context, p driver.Policy) error {
	if _, err := e.exec(ctx, e.q.updatePolicy, p.MaxActive, p.MaxActivePerKey, p.MaxBlocked, micros(p.UpdatedAt), []byte(p.Queue)); err != nil {
		return fmt.Errorf("update policy of queue %q: %w", p.Queue, err)
	}
	return nil
}

func (e *executor) DeletePolicy(ctx context.Context, queue string) error {
	if _, err := e.exec(ctx, e.q.deletePolicy, []byte(queue)); err != nil {
		return fmt.Errorf("delete policy of queue %q: %w", queue, err)
	}
	return nil
}

func (e *executor) PolicyKeys(ctx context.Context, queue string) ([]string, error) {
	keys, err := queryColumn[string](ctx, e.db, e.q.policyKeys, []byte(queue))
	if err != nil {
		return nil, fmt.Errorf("list policy-limited keys of queue %q: %w", queue, err)
	}
	return keys, nil
}

func (e *executor) SetKeyLimit(ctx context.Context, key string, limit int, now time.Time) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("set key limit: %w", err)
	}
	if _, err := e.exec(ctx, e.q.setKeyLimit, hash(key), []byte(key), limit, micros(now)); err != nil {
		return fmt.Errorf("set limit of key %q: %w", key, err)
	}
	return nil
}

func (e *executor) DeleteKeyLimit(ctx context.Context, key string) (bool, error) {
	n, err := e.exec(ctx, e.q.deleteKeyLimit, hash(key), []byte(key))
	if err != nil {
		return false, fmt.Errorf("clear limit of key %q: %w", key, err)
	}
	return n == 1, nil
}

func (e *executor) LatestJobLimit(ctx context.Context, key string) (driver.Limit, string, bool, error) {
	var j driver.Job
	err := scanJob(e.db.QueryRowContext(ctx, e.q.latestJobLimit, hash(key)).Scan, &j)
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Limit{}, "", false, nil
	}
	if err != nil {
		return driver.Limit{}, "", false, fmt.Errorf("read the newest job of key %q: %w", key, err)
	}
	return j.Limit, j.Queue, true, nil
}
