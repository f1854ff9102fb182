package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlhistory"
)

// The history (driver.HistoryStore) and the key search
// (driver.KeySearcher), on the dialect's SQL (Dialect.History,
// Dialect.SearchKeys).
var (
	_ driver.HistoryStore = (*Executor)(nil)
	_ driver.KeySearcher  = (*Executor)(nil)
)

// history runs the history's statements; its writes take several
// statements, so they run in the engine's transaction (Atomic).
func (e *Executor) history() sqlhistory.Store {
	return sqlhistory.Store{DB: e.db, Q: e.d.History(), Text: e.d.Text,
		Atomic: func(ctx context.Context, fn func(sqlhistory.DB) error) error {
			return e.Atomic(ctx, func(x *Executor) error { return fn(x.db) })
		}}
}

func (e *Executor) AddThroughput(ctx context.Context, counts []driver.Throughput) error {
	return e.history().AddThroughput(ctx, counts)
}

func (e *Executor) SnapshotHistory(ctx context.Context, s driver.HistorySnapshot) (bool, error) {
	return e.history().SnapshotHistory(ctx, s)
}

func (e *Executor) PruneHistory(ctx context.Context, before time.Time, max int) (int, error) {
	return e.history().PruneHistory(ctx, before, max)
}

func (e *Executor) ReadHistory(ctx context.Context, from time.Time, queue string) (driver.History, error) {
	return e.history().ReadHistory(ctx, from, queue)
}

// scanSemaphore reads key, value, lim, blocked, multi, duration_ms, expires_at.
func scanSemaphore(row *sql.Rows) (s driver.Semaphore, err error) {
	var durMS, expires int64
	err = row.Scan(&s.Key, &s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &expires)
	s.Duration, s.ExpiresAt = fromMillis(durMS), FromMicros(expires)
	return s, err
}

// SearchKeys lists, in key order, up to max semaphores whose keys start
// with prefix and end with suffix, matched byte for byte.
func (e *Executor) SearchKeys(ctx context.Context, prefix, suffix string, max int) ([]driver.Semaphore, error) {
	query, pattern := e.d.SearchKeys(prefix, suffix)
	out, err := Collect(ctx, e.db, scanSemaphore, query, pattern, max)
	if err != nil {
		return nil, fmt.Errorf("search keys: %w", err)
	}
	return out, nil
}
