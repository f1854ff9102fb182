package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
)

func (e *executor) SemaphoreEnsure(ctx context.Context, l driver.Limit, now time.Time) error {
	if err := checkKey(l.Key); err != nil {
		return fmt.Errorf("create semaphore: %w", err)
	}
	if err := e.write(ctx, e.q.semEnsure, l.Key, max(l.To, 1), l.Duration.Milliseconds(), now.Add(l.Duration)); err != nil {
		return fmt.Errorf("create semaphore %q: %w", l.Key, err)
	}
	return nil
}

func (e *executor) SemaphoreLock(ctx context.Context, key, queue string) (driver.Semaphore, bool, error) {
	s := driver.Semaphore{Key: key}
	var durMS int64
	ok, err := found(e.db.QueryRow(ctx, e.q.semLock, key, queue).Scan(&s.Value, &s.Limit, &s.Blocked, &durMS, &s.ExpiresAt,
		&s.Override, &s.Policy.Queue, &s.Policy.MaxActivePerKey, &s.Policy.MaxBlocked))
	if err != nil {
		return s, false, fmt.Errorf("lock semaphore %q: %w", key, err)
	}
	s.Duration = time.Duration(durMS) * time.Millisecond
	return s, ok, nil
}

func (e *executor) SemaphoreTryLock(ctx context.Context, key string) (bool, error) {
	var one int
	ok, err := found(e.db.QueryRow(ctx, e.q.semTryLock, key).Scan(&one))
	if err != nil {
		return false, fmt.Errorf("lock semaphore %q: %w", key, err)
	}
	return ok, nil
}

func (e *executor) SemaphoreSave(ctx context.Context, s driver.Semaphore) error {
	err := e.write(ctx, e.q.semSave, s.Key, s.Value, s.Limit, s.Blocked, s.Duration.Milliseconds(), s.ExpiresAt)
	if err != nil {
		return fmt.Errorf("save semaphore %q: %w", s.Key, err)
	}
	return nil
}

func (e *executor) PromoteBlocked(ctx context.Context, key string, n int, now time.Time) (driver.Promotion, error) {
	var p driver.Promotion
	type moved struct {
		ID    int64
		Queue string
	}
	rows, err := collect(ctx, e.db, pgx.RowToStructByPos[moved], e.q.promoteBlocked, key, n, now)
	if err != nil {
		return p, fmt.Errorf("promote blocked jobs of %q: %w", key, err)
	}
	for _, r := range rows {
		p.Jobs++
		p.AddQueue(r.Queue)
		p.JobIDs = append(p.JobIDs, r.ID)
	}
	return p, nil
}

func (e *executor) ReleaseMany(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	n := make([]int32, len(counts))
	for i, c := range counts {
		n[i] = int32(c)
	}
	// Queued in bq's pipelined transaction: it goes out in one round trip
	// with the promotion that follows.
	if err := e.write(ctx, e.q.releaseMany, keys, n); err != nil {
		return nil, fmt.Errorf("release %d keys: %w", len(keys), err)
	}
	type promoted struct {
		key string
		p   driver.Promotion
	}
	rows, err := collect(ctx, e.db, func(r pgx.CollectableRow) (k promoted, err error) {
		err = r.Scan(&k.key, &k.p.Jobs, &k.p.Queues)
		return k, err
	}, e.q.promoteMany, keys, now)
	if err != nil {
		return nil, fmt.Errorf("promote blocked jobs of %d keys: %w", len(keys), err)
	}
	moved := make(map[string]driver.Promotion, len(rows))
	for _, r := range rows {
		if r.p.Jobs > 0 {
			moved[r.key] = r.p
		}
	}
	out := make([]driver.Promotion, len(keys))
	for i, k := range keys {
		out[i] = moved[k]
	}
	return out, nil
}

func (e *executor) CountHolders(ctx context.Context, key string) (int, int, error) {
	var holders, blocked int
	if err := e.db.QueryRow(ctx, e.q.countHolders, key).Scan(&holders, &blocked); err != nil {
		return 0, 0, fmt.Errorf("count holders of %q: %w", key, err)
	}
	return holders, blocked, nil
}

func (e *executor) keys(ctx context.Context, what, query string, args ...any) ([]string, error) {
	keys, err := collect(ctx, e.db, pgx.RowTo[string], query, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s semaphores: %w", what, err)
	}
	return keys, nil
}

func (e *executor) ExpiredSemaphores(ctx context.Context, now time.Time, after string, max int) ([]string, error) {
	return e.keys(ctx, "expired", e.q.expiredSems, now, after, max)
}

func (e *executor) PromotableSemaphores(ctx context.Context, after string, max int) ([]string, error) {
	return e.keys(ctx, "promotable", e.q.promotableSems, after, max)
}

func (e *executor) DeleteIdleSemaphores(ctx context.Context, now time.Time, max int) (int, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteIdleSems, now, max)
	if err != nil {
		return 0, fmt.Errorf("delete idle semaphores: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
