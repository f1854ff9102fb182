package sqlexec

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

var _ driver.BatchLocker = (*Executor)(nil)

// AdmitQueries are the statements of set-wise admission (SemaphoreLockMany,
// SemaphoreSaveMany; SQLite admits its own way, with JSON lists). Rows are
// written with Release's SaveHead and Values(n, 8): key index, key,
// value, lim, blocked, multi, duration_ms, expires_at.
type AdmitQueries struct {
	// EnsureTail ends the multi-row INSERT that creates the missing
	// semaphores and leaves existing ones as they are, never failing on a
	// duplicate key.
	EnsureTail string
	// Lock reads at, value, lim, blocked, multi, duration_ms, expires_at,
	// the override, and the policy's queue, max_active_per_key,
	// max_blocked, max_wait_us and adaptive_min of the keys of its ListMarker, a table of (at, k, q):
	// each key's position in the batch, its KeyIndex and its queue's
	// Text. It locks the semaphores, and only them, in position order.
	Lock string
	// FirstKey selects the first row of Lock's table, naming its columns
	// at, k and q; NextKey, each further row, joined by UNION ALL.
	FirstKey, NextKey string
	// SaveTail ends the multi-row upsert that writes the semaphores back.
	SaveTail string
}

// SemaphoreLockMany creates and locks the semaphores of limits, chunk
// after chunk of MaxList keys in key order, in two statements a chunk.
func (e *Executor) SemaphoreLockMany(ctx context.Context, limits []driver.Limit, queues []string, now time.Time) ([]driver.Semaphore, error) {
	if len(limits) != len(queues) {
		return nil, fmt.Errorf("lock %d semaphores: %d queues given, want one a key", len(limits), len(queues))
	}
	out := make([]driver.Semaphore, len(limits))
	err := e.Atomic(ctx, func(x *Executor) error {
		for i, l := range limits {
			if err := x.d.CheckKey(l.Key); err != nil {
				return fmt.Errorf("lock semaphores: %w", err)
			}
			out[i].Key = l.Key
		}
		size := len(limits)
		if m := x.d.MaxList(); m > 0 {
			size = min(size, m)
		}
		for from := 0; from < len(limits); from += size {
			to := min(from+size, len(limits))
			if err := x.lockChunk(ctx, limits[from:to], queues[from:to], now, out[from:to]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lockChunk creates the chunk's missing semaphores and locks them all; a
// semaphore deleted idle between the two is created and locked again.
func (x *Executor) lockChunk(ctx context.Context, limits []driver.Limit, queues []string, now time.Time, out []driver.Semaphore) error {
	want := make([]int, len(limits))
	for i := range want {
		want[i] = i
	}
	for range 3 {
		values := make([]any, 0, 8*len(want))
		for _, i := range want {
			l := limits[i]
			to := max(l.To, 1)
			values = append(values, x.d.KeyIndex(l.Key), x.d.Text(l.Key), to, to, 0, 0, l.Duration.Milliseconds(), Micros(now.Add(l.Duration)))
		}
		if _, err := x.db.ExecContext(ctx, x.q.Release.SaveHead+Values(len(want), 8)+x.q.Admit.EnsureTail, values...); err != nil {
			return fmt.Errorf("create %d semaphores: %w", len(want), err)
		}
		q := x.q.Admit
		args := make([]any, 0, 3*len(want))
		for _, i := range want {
			args = append(args, i, x.d.KeyIndex(limits[i].Key), x.d.Text(queues[i]))
		}
		table := "(" + q.FirstKey + strings.Repeat(q.NextKey, len(want)-1) + ")"
		rows, err := x.db.QueryContext(ctx, strings.Replace(q.Lock, ListMarker, table, 1), args...)
		if err != nil {
			return fmt.Errorf("lock %d semaphores: %w", len(want), err)
		}
		found := make([]bool, len(limits))
		for rows.Next() {
			var at int
			var durMS, expires, intervalUS, waitUS int64
			var s driver.Semaphore
			var queue []byte
			if err := rows.Scan(&at, &s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &expires, &intervalUS,
				&s.Override, &s.Adapt, &queue, &s.Policy.MaxActivePerKey, &s.Policy.MaxBlocked, &waitUS, &s.Policy.AdaptiveMin); err != nil {
				rows.Close()
				return fmt.Errorf("lock %d semaphores: %w", len(want), err)
			}
			if at < 0 || at >= len(limits) {
				rows.Close()
				return fmt.Errorf("lock of semaphores named key %d of %d", at, len(limits))
			}
			s.Key, s.Policy.Queue = limits[at].Key, string(queue)
			s.Duration, s.ExpiresAt = fromMillis(durMS), FromMicros(expires)
			s.Interval, s.Policy.MaxWait = time.Duration(intervalUS)*time.Microsecond, time.Duration(waitUS)*time.Microsecond
			out[at], found[at] = s, true
		}
		if err := CloseRows(rows); err != nil {
			return fmt.Errorf("lock %d semaphores: %w", len(want), err)
		}
		want = want[:0]
		for i, ok := range found {
			if !ok {
				want = append(want, i)
			}
		}
		if len(want) == 0 {
			return nil
		}
	}
	return fmt.Errorf("lock semaphore %q: it keeps disappearing", limits[want[0]].Key)
}

// SemaphoreSaveMany writes sems back in one statement per MaxList rows.
func (e *Executor) SemaphoreSaveMany(ctx context.Context, sems []driver.Semaphore) error {
	return e.Atomic(ctx, func(x *Executor) error {
		size := len(sems)
		if m := x.d.MaxList(); m > 0 {
			size = min(size, m)
		}
		for from := 0; from < len(sems); from += size {
			chunk := sems[from:min(from+size, len(sems))]
			values := make([]any, 0, 8*len(chunk))
			for _, s := range chunk {
				values = append(values, x.d.KeyIndex(s.Key), x.d.Text(s.Key), s.Value, s.Limit, s.Blocked, s.Multi,
					s.Duration.Milliseconds(), Micros(s.ExpiresAt))
			}
			if _, err := x.db.ExecContext(ctx, x.q.Release.SaveHead+Values(len(chunk), 8)+x.q.Admit.SaveTail, values...); err != nil {
				return fmt.Errorf("save %d semaphores: %w", len(chunk), err)
			}
		}
		return nil
	})
}
