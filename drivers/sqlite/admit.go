package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
)

var _ driver.BatchLocker = executor{}

// SemaphoreLockMany creates the missing semaphores of limits and reads
// them all, in two statements whatever the number of keys: the write
// transaction is the lock, and each statement's one text (a JSON list)
// stays prepared, where a key-by-key lock took three statements a key.
func (e executor) SemaphoreLockMany(ctx context.Context, limits []driver.Limit, queues []string, now time.Time) ([]driver.Semaphore, error) {
	if len(limits) != len(queues) {
		return nil, fmt.Errorf("lock %d semaphores: %d queues given, want one a key", len(limits), len(queues))
	}
	ensure := make([][4]any, len(limits))
	lock := make([][2]string, len(limits))
	for i, l := range limits {
		ensure[i] = [4]any{l.Key, max(l.To, 1), l.Duration.Milliseconds(), sqlexec.Micros(now.Add(l.Duration))}
		lock[i] = [2]string{l.Key, queues[i]}
	}
	out := make([]driver.Semaphore, len(limits))
	err := e.Atomic(ctx, func(x *sqlexec.Executor) error {
		if _, err := x.DB().ExecContext(ctx, e.d.dl.own.ensureSems, jsonOf(ensure)); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		rows, err := x.DB().QueryContext(ctx, e.d.dl.own.lockSems, jsonOf(lock))
		if err != nil {
			return err
		}
		found := 0
		for rows.Next() {
			var at int
			var durMS, expires int64
			var s driver.Semaphore
			if err := rows.Scan(&at, &s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &expires,
				&s.Override, &s.Policy.Queue, &s.Policy.MaxActivePerKey, &s.Policy.MaxBlocked); err != nil {
				rows.Close()
				return err
			}
			if at < 0 || at >= len(limits) || out[at].Key != "" {
				rows.Close()
				return fmt.Errorf("read key %d of %d", at, len(limits))
			}
			s.Key, s.Duration, s.ExpiresAt = limits[at].Key, time.Duration(durMS)*time.Millisecond, sqlexec.FromMicros(expires)
			out[at] = s
			found++
		}
		if err := sqlexec.CloseRows(rows); err != nil {
			return err
		}
		// Nothing deletes a row between the two under the write lock.
		if found != len(limits) {
			return fmt.Errorf("%d of %d semaphores missing after their create", len(limits)-found, len(limits))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lock %d semaphores: %w", len(limits), err)
	}
	return out, nil
}

// SemaphoreSaveMany writes sems back in two statements: every row, then
// the expiry of those whose expiry changed (see saveSems).
func (e executor) SemaphoreSaveMany(ctx context.Context, sems []driver.Semaphore) error {
	rows := make([][6]any, len(sems))
	expiries := make([][2]any, len(sems))
	for i, s := range sems {
		rows[i] = [6]any{s.Key, s.Value, s.Limit, s.Blocked, s.Multi, s.Duration.Milliseconds()}
		expiries[i] = [2]any{s.Key, sqlexec.Micros(s.ExpiresAt)}
	}
	err := e.Atomic(ctx, func(x *sqlexec.Executor) error {
		if _, err := x.DB().ExecContext(ctx, e.d.dl.own.saveSems, jsonOf(rows)); err != nil {
			return err
		}
		_, err := x.DB().ExecContext(ctx, e.d.dl.own.expireSems, jsonOf(expiries))
		return err
	})
	if err != nil {
		return fmt.Errorf("save %d semaphores: %w", len(sems), err)
	}
	return nil
}
