package sqlite

import (
	"strings"

	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/internal/sqlhistory"
)

// The history (driver.HistoryStore) and the key search
// (driver.KeySearcher): sqlexec runs this SQL.

func newHistoryQueries(p func(string) string) sqlhistory.Queries {
	q := sqlexec.HistoryQueries(p, func(col string) string { return "sum(" + col + ")" })
	q.ThroughputTail = ` ON CONFLICT (minute, queue) DO UPDATE SET completed = completed + excluded.completed,
	failed = failed + excluded.failed`
	q.ClaimMinute = p(`INSERT INTO {p}history_snapshots (minute, taken_at) VALUES (?, ?) ON CONFLICT DO NOTHING`)
	q.DepthTail = ` ON CONFLICT (minute, queue) DO UPDATE SET ready = excluded.ready, running = excluded.running,
	blocked = excluded.blocked, scheduled = excluded.scheduled`
	q.KeysHead = p(`INSERT INTO {p}history_keys (minute, rank, key, blocked) VALUES `)
	q.PruneRows, q.PruneKeys, q.PruneSnapshot = p(prune("history")), p(prune("history_keys")), p(prune("history_snapshots"))
	q.Keys = p(`SELECT minute, key, blocked FROM {p}history_keys WHERE minute >= ? ORDER BY minute, rank LIMIT ?`)
	// GLOB, not LIKE: SQLite's LIKE folds ASCII case, and keys
	// differing only in case are different keys, as on the other
	// databases.
	q.SearchKeys = p(`SELECT key, value, lim, blocked, multi, duration_ms, expires_at FROM {p}semaphores
WHERE key GLOB ? ORDER BY key LIMIT ?`)
	return q
}

// prune deletes the oldest rows of table before a minute, up to a count.
func prune(table string) string {
	return `DELETE FROM {p}` + table + ` WHERE rowid IN (SELECT rowid FROM {p}` + table + `
	WHERE minute < ? ORDER BY minute LIMIT ?)`
}

func (dl *dialect) History() *sqlhistory.Queries { return &dl.history }

func (dl *dialect) SearchKeys(prefix, suffix string) (string, any) {
	return dl.history.SearchKeys, globPattern(prefix, suffix)
}

// globPattern is the GLOB pattern of the keys that start with prefix and
// end with suffix: every '*', '?' and '[' in them stands for itself.
func globPattern(prefix, suffix string) string {
	esc := strings.NewReplacer("*", "[*]", "?", "[?]", "[", "[[]")
	return esc.Replace(prefix) + "*" + esc.Replace(suffix)
}
