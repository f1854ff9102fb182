package sqlexec

import (
	"context"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlhistory"
)

// The history (driver.HistoryStore), on the dialect's SQL
// (Dialect.History).
var _ driver.HistoryStore = (*Executor)(nil)

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
