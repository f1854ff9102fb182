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

func (e *Executor) HistoryAddThroughput(ctx context.Context, counts []driver.Throughput) error {
	return e.history().AddThroughput(ctx, counts)
}

func (e *Executor) HistoryInsertSnapshot(ctx context.Context, s driver.HistorySnapshot) (bool, error) {
	return e.history().SnapshotHistory(ctx, s)
}

func (e *Executor) HistoryPrune(ctx context.Context, before time.Time, max int) (int, error) {
	return e.history().PruneHistory(ctx, before, max)
}

func (e *Executor) HistoryList(ctx context.Context, from time.Time, queue string) (driver.History, error) {
	return e.history().ReadHistory(ctx, from, queue)
}

// HistoryQueries are the history's statements both database/sql dialects
// spell alike, through p: the heads and rows of its multi-row INSERTs and
// its reads, each sum spelled by sum (a dialect casts it its own way). A
// dialect adds its upserts (the tails and ClaimMinute), KeysHead, the
// prunes, Keys and SearchKeys.
func HistoryQueries(p func(string) string, sum func(col string) string) sqlhistory.Queries {
	rows, ofQueue := sqlhistory.RowsSQL(sum)
	return sqlhistory.Queries{
		ThroughputHead: p(sqlhistory.ThroughputHead),
		ThroughputRow:  `(?, ?, ?, ?)`,
		DepthHead:      p(sqlhistory.DepthHead),
		DepthRow:       `(?, ?, ?, ?, ?, ?)`,
		KeysRow:        `(?, ?, ?, ?)`,
		Rows:           p(rows),
		RowsOfQueue:    p(ofQueue),
		Snapped:        p(sqlhistory.Snapped),
	}
}
