package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
)

var _ driver.BatchLocker = executor{}

// SemaphoreLockMany reads the semaphores of limits and creates those
// missing, in one statement when every key has one, three otherwise,
// whatever the number of keys: the write transaction is the lock, and
// each statement's one text (a JSON list) stays prepared, where a
// key-by-key lock took three statements a key.
func (e executor) SemaphoreLockMany(ctx context.Context, limits []driver.Limit, queues []string, now time.Time) ([]driver.Semaphore, error) {
	if len(limits) != len(queues) {
		return nil, fmt.Errorf("lock %d semaphores: %d queues given, want one a key", len(limits), len(queues))
	}
	out := make([]driver.Semaphore, len(limits))
	err := e.Atomic(ctx, func(x *sqlexec.Executor) error {
		want := make([]int, len(limits))
		for i := range want {
			want[i] = i
		}
		missing, err := e.lockSems(ctx, x, limits, queues, want, out)
		if err != nil || len(missing) == 0 {
			return err
		}
		ensure := make([][4]any, len(missing))
		for j, i := range missing {
			l := limits[i]
			ensure[j] = [4]any{l.Key, max(l.To, 1), l.Duration.Milliseconds(), sqlexec.Micros(now.Add(l.Duration))}
		}
		if _, err := x.DB().ExecContext(ctx, e.d.dl.own.ensureSems, jsonOf(ensure)); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		// Nothing deletes a row between the two under the write lock.
		if missing, err = e.lockSems(ctx, x, limits, queues, missing, out); err == nil && len(missing) > 0 {
			err = fmt.Errorf("%d of %d semaphores missing after their create", len(missing), len(limits))
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lock %d semaphores: %w", len(limits), err)
	}
	return out, nil
}

// lockSems reads the semaphores of limits[i] for each i of want into
// out[i], and returns the positions of those missing.
func (e executor) lockSems(ctx context.Context, x *sqlexec.Executor, limits []driver.Limit, queues []string, want []int, out []driver.Semaphore) ([]int, error) {
	list := make([][2]string, len(want))
	for j, i := range want {
		list[j] = [2]string{limits[i].Key, queues[i]}
	}
	rows, err := x.DB().QueryContext(ctx, e.d.dl.own.lockSems, jsonOf(list))
	if err != nil {
		return nil, err
	}
	found := make([]bool, len(want))
	for rows.Next() {
		var at int
		var durMS, expires, intervalUS, waitUS int64
		var s driver.Semaphore
		if err := rows.Scan(&at, &s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &expires, &intervalUS,
			&s.Override, &s.Adapt, &s.Policy.Queue, &s.Policy.MaxActivePerKey, &s.Policy.MaxBlocked, &waitUS, &s.Policy.AdaptiveMin); err != nil {
			rows.Close()
			return nil, err
		}
		if at < 0 || at >= len(want) || found[at] {
			rows.Close()
			return nil, fmt.Errorf("read key %d of %d", at, len(want))
		}
		s.Key, s.Duration, s.ExpiresAt = limits[want[at]].Key, time.Duration(durMS)*time.Millisecond, sqlexec.FromMicros(expires)
		s.Interval, s.Policy.MaxWait = time.Duration(intervalUS)*time.Microsecond, time.Duration(waitUS)*time.Microsecond
		out[want[at]], found[at] = s, true
	}
	if err := sqlexec.CloseRows(rows); err != nil {
		return nil, err
	}
	var missing []int
	for j, ok := range found {
		if !ok {
			missing = append(missing, want[j])
		}
	}
	return missing, nil
}

// SemaphoreSaveMany writes sems back: every row, then the expiry of those
// whose expiry changed (see saveSems).
func (e executor) SemaphoreSaveMany(ctx context.Context, sems []driver.Semaphore) error {
	rows := make([]any, 0, 6*len(sems))
	expiries := make([]any, 0, 2*len(sems))
	for _, s := range sems {
		rows = append(rows, s.Key, s.Value, s.Limit, s.Blocked, s.Multi, s.Duration.Milliseconds())
		expiries = append(expiries, s.Key, sqlexec.Micros(s.ExpiresAt))
	}
	err := e.Atomic(ctx, func(x *sqlexec.Executor) error {
		if err := x.ExecRows(ctx, e.d.dl.own.saveSems, 6, rows); err != nil {
			return err
		}
		return x.ExecRows(ctx, e.d.dl.own.expireSems, 2, expiries)
	})
	if err != nil {
		return fmt.Errorf("save %d semaphores: %w", len(sems), err)
	}
	return nil
}
