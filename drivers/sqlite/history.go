package sqlite

import (
	"context"
	"strings"
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
	rows, ofQueue := sqlhistory.RowsSQL(func(col string) string { return "sum(" + col + ")" })
	return historyQueries{Queries: sqlhistory.Queries{
		ThroughputHead: p(sqlhistory.ThroughputHead),
		ThroughputRow:  `(?, ?, ?, ?)`,
		ThroughputTail: ` ON CONFLICT (minute, queue) DO UPDATE SET completed = completed + excluded.completed,
	failed = failed + excluded.failed`,
		ClaimMinute: p(`INSERT INTO {p}history_snapshots (minute, taken_at) VALUES (?, ?) ON CONFLICT DO NOTHING`),
		DepthHead:   p(sqlhistory.DepthHead),
		DepthRow:    `(?, ?, ?, ?, ?, ?)`,
		DepthTail: ` ON CONFLICT (minute, queue) DO UPDATE SET ready = excluded.ready, running = excluded.running,
	blocked = excluded.blocked, scheduled = excluded.scheduled`,
		KeysHead:      p(`INSERT INTO {p}history_keys (minute, rank, key, blocked) VALUES `),
		KeysRow:       `(?, ?, ?, ?)`,
		PruneRows:     p(prune("history")),
		PruneKeys:     p(prune("history_keys")),
		PruneSnapshot: p(prune("history_snapshots")),
		Rows:          p(rows),
		RowsOfQueue:   p(ofQueue),
		Snapped:       p(sqlhistory.Snapped),
		Keys:          p(`SELECT minute, key, blocked FROM {p}history_keys WHERE minute >= ? ORDER BY minute, rank LIMIT ?`),
	},
		// GLOB, not LIKE: SQLite's LIKE folds ASCII case, and keys
		// differing only in case are different keys, as on the other
		// databases.
		searchKeys: p(`SELECT key, value, lim, blocked, duration_ms, expires_at FROM {p}semaphores
WHERE key GLOB ? ORDER BY key LIMIT ?`),
	}
}

// prune deletes the oldest rows of table before a minute, up to a count.
func prune(table string) string {
	return `DELETE FROM {p}` + table + ` WHERE rowid IN (SELECT rowid FROM {p}` + table + `
	WHERE minute < ? ORDER BY minute LIMIT ?)`
}

func (e *executor) history() sqlhistory.Store {
	return sqlhistory.Store{DB: e.db, Q: &e.q.history.Queries, Text: func(s string) any { return s },
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
	return e.inspector().SearchKeys(ctx, e.q.history.searchKeys, globPattern(prefix, suffix), max)
}

// globPattern is the GLOB pattern of the keys that start with prefix and
// end with suffix: every '*', '?' and '[' in them stands for itself.
func globPattern(prefix, suffix string) string {
	esc := strings.NewReplacer("*", "[*]", "?", "[?]", "[", "[[]")
	return esc.Replace(prefix) + "*" + esc.Replace(suffix)
}
