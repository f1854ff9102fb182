package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
)

var _ driver.MultiBatcher = executor{}

// The set-wise promotion of mixed lines takes one statement per step on
// SQLite, each with one text whatever the number of keys (the keys go as
// a JSON list), prepared once per connection: a text that changes with
// the batch (one branch a key) is parsed anew each time, which cost a
// third of a keyed drain's CPU with a second key per job.

// LineListHeadsMany reads every line's heads in one statement.
func (e executor) LineListHeadsMany(ctx context.Context, keys []string, ns []int) ([][]driver.LineHead, error) {
	out := make([][]driver.LineHead, len(keys))
	var want []string
	var at []int // want's positions in keys
	most := 0
	for i, k := range keys {
		if ns[i] > 0 {
			want, at = append(want, k), append(at, i)
			most = max(most, ns[i])
		}
	}
	if len(want) == 0 {
		return out, nil
	}
	rows, err := e.DB().QueryContext(ctx, e.d.dl.own.lineHeadsOfKeys, jsonOf(want), most)
	if err != nil {
		return nil, fmt.Errorf("read the heads of the lines of %d keys: %w", len(want), err)
	}
	err = func() error {
		defer rows.Close()
		for rows.Next() {
			var w int
			var h driver.LineHead
			if err := sqlexec.ScanLineHead(rows.Scan, &h, &w); err != nil {
				return err
			}
			if w < 0 || w >= len(want) {
				return fmt.Errorf("line heads named key %d of %d", w, len(want))
			}
			// Each line's rows come in line order: keep its first n.
			if i := at[w]; len(out[i]) < ns[i] {
				out[i] = append(out[i], h)
			}
		}
		return rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("read the heads of the lines of %d keys: %w", len(want), err)
	}
	return out, nil
}

// SemaphoreTryLockMany reads the keys' rows: the write transaction is the
// lock.
func (e executor) SemaphoreTryLockMany(ctx context.Context, keys []string) ([]driver.Semaphore, error) {
	out, err := sqlexec.Collect(ctx, e.DB(), func(rows *sql.Rows) (s driver.Semaphore, err error) {
		var at int
		var durMS, expires int64
		if err = rows.Scan(&at, &s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &expires); err != nil {
			return s, err
		}
		if at < 0 || at >= len(keys) {
			return s, fmt.Errorf("read key %d of %d", at, len(keys))
		}
		s.Key, s.Duration, s.ExpiresAt = keys[at], time.Duration(durMS)*time.Millisecond, sqlexec.FromMicros(expires)
		return s, nil
	}, e.d.dl.own.tryLockSems, jsonOf(keys))
	if err != nil {
		return nil, fmt.Errorf("lock the semaphores of %d keys: %w", len(keys), err)
	}
	return out, nil
}

// LinePromoteFirst moves the lines' first jobs in three statements
// (promoteFirst).
func (e executor) LinePromoteFirst(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	var out []driver.Promotion
	err := e.Atomic(ctx, func(x *sqlexec.Executor) error {
		var want []string
		var n, at []int
		for i, k := range keys {
			if counts[i] > 0 {
				want, n, at = append(want, k), append(n, counts[i]), append(at, i)
			}
		}
		moved, err := e.promoteFirst(ctx, x, want, n, now)
		if err != nil {
			return err
		}
		out = make([]driver.Promotion, len(keys))
		for j, i := range at {
			out[i] = moved[j]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("promote the first blocked jobs of %d keys: %w", len(keys), err)
	}
	return out, nil
}
