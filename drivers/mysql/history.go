package mysql

import (
	"context"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlhistory"
)

// The history (driver.HistoryStore) and the key search
// (driver.KeySearcher): sqlhistory and sqlinspect run this SQL.

var (
	_ driver.HistoryStore = (*executor)(nil)
	_ driver.KeySearcher  = (*executor)(nil)
)

// historyQueries are the history's statements and the key search.
type historyQueries struct {
	sqlhistory.Queries
	searchKeys string
}

func newHistoryQueries(p func(string) string) historyQueries {
	rows, ofQueue := sqlhistory.RowsSQL(func(col string) string { return "CAST(sum(" + col + ") AS SIGNED)" })
	return historyQueries{Queries: sqlhistory.Queries{
		// VALUES() rather than a row alias: MariaDB has no alias.
		ThroughputHead: p(sqlhistory.ThroughputHead),
		ThroughputRow:  `(?, ?, ?, ?)`,
		ThroughputTail: ` ON DUPLICATE KEY UPDATE completed = completed + VALUES(completed), failed = failed + VALUES(failed)`,
		// Without CLIENT_FOUND_ROWS an update that changes nothing
		// counts 0 rows: the minute was taken.
		ClaimMinute: p(`INSERT INTO {p}history_snapshots (minute, taken_at) VALUES (?, ?) ON DUPLICATE KEY UPDATE minute = minute`),
		DepthHead:   p(sqlhistory.DepthHead),
		DepthRow:    `(?, ?, ?, ?, ?, ?)`,
		DepthTail: ` ON DUPLICATE KEY UPDATE ready = VALUES(ready), running = VALUES(running), blocked = VALUES(blocked),
	scheduled = VALUES(scheduled)`,
		KeysHead:      p("INSERT INTO {p}history_keys (minute, `rank`, `key`, blocked) VALUES "),
		KeysRow:       `(?, ?, ?, ?)`,
		PruneRows:     p(`DELETE FROM {p}history WHERE minute < ? ORDER BY minute LIMIT ?`),
		PruneKeys:     p(`DELETE FROM {p}history_keys WHERE minute < ? ORDER BY minute LIMIT ?`),
		PruneSnapshot: p(`DELETE FROM {p}history_snapshots WHERE minute < ? ORDER BY minute LIMIT ?`),
		Rows:          p(rows),
		RowsOfQueue:   p(ofQueue),
		Snapped:       p(sqlhistory.Snapped),
		Keys:          p("SELECT minute, `key`, blocked FROM {p}history_keys WHERE minute >= ? ORDER BY minute, `rank` LIMIT ?"),
	},
		// Keys are VARBINARY: LIKE compares bytes, with no case folding.
		searchKeys: p("SELECT `key`, value, lim, blocked, duration_ms, expires_at FROM {p}semaphores\n" +
			"WHERE `key` LIKE ? ESCAPE '!' ORDER BY `key` LIMIT ?"),
	}
}

func (e *executor) history() sqlhistory.Store {
	return sqlhistory.Store{DB: e.db, Q: &e.q.history.Queries, Text: func(s string) any { return []byte(s) },
		Atomic: func(ctx context.Context, fn func(sqlhistory.DB) error) error {
			return e.atomic(ctx, func(e *executor) error { return fn(e.db) })
		}}
}

func (e *executor) AddThroughput(ctx context.Context, counts []driver.Throughput) error {
	return e.history().AddThroughput(ctx, counts)
}

func (e *executor) SnapshotHistory(ctx context.Context, s driver.HistorySnapshot) (bool, error) {
	return e.history().SnapshotHistory(ctx, s)
}

func (e *executor) PruneHistory(ctx context.Context, before time.Time, max int) (int, error) {
	return e.history().PruneHistory(ctx, before, max)
}

func (e *executor) ReadHistory(ctx context.Context, from time.Time, queue string) (driver.History, error) {
	return e.history().ReadHistory(ctx, from, queue)
}

func (e *executor) SearchKeys(ctx context.Context, prefix, suffix string, max int) ([]driver.Semaphore, error) {
	return e.inspector().SearchKeys(ctx, e.q.history.searchKeys, []byte(driver.LikePattern(prefix, suffix)), max)
}
