package mysql

import (
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/internal/sqlhistory"
)

// The history (driver.HistoryStore) and the key search
// (driver.KeySearcher): sqlexec runs this SQL.

func newHistoryQueries(p func(string) string) sqlhistory.Queries {
	q := sqlexec.HistoryQueries(p, func(col string) string { return "CAST(sum(" + col + ") AS SIGNED)" })
	// VALUES() rather than a row alias: MariaDB has no alias.
	q.ThroughputTail = ` ON DUPLICATE KEY UPDATE completed = completed + VALUES(completed), failed = failed + VALUES(failed)`
	// Without CLIENT_FOUND_ROWS an update that changes nothing
	// counts 0 rows: the minute was taken.
	q.ClaimMinute = p(`INSERT INTO {p}history_snapshots (minute, taken_at) VALUES (?, ?) ON DUPLICATE KEY UPDATE minute = minute`)
	q.DepthTail = ` ON DUPLICATE KEY UPDATE ready = VALUES(ready), running = VALUES(running), blocked = VALUES(blocked),
	scheduled = VALUES(scheduled)`
	q.KeysHead = p("INSERT INTO {p}history_keys (minute, `rank`, `key`, blocked) VALUES ")
	q.PruneRows = p(`DELETE FROM {p}history WHERE minute < ? ORDER BY minute LIMIT ?`)
	q.PruneKeys = p(`DELETE FROM {p}history_keys WHERE minute < ? ORDER BY minute LIMIT ?`)
	q.PruneSnapshot = p(`DELETE FROM {p}history_snapshots WHERE minute < ? ORDER BY minute LIMIT ?`)
	q.Keys = p("SELECT minute, `key`, blocked FROM {p}history_keys WHERE minute >= ? ORDER BY minute, `rank` LIMIT ?")
	// Keys are VARBINARY: LIKE compares bytes, with no case folding.
	q.SearchKeys = p("SELECT `key`, value, lim, blocked, multi, duration_ms, expires_at FROM {p}semaphores\n" +
		"WHERE `key` LIKE ? ESCAPE '!' ORDER BY `key` LIMIT ?")
	return q
}

func (d *dialect) History() *sqlhistory.Queries { return &d.history }

func (d *dialect) SearchKeys(prefix, suffix string) (string, any) {
	return d.history.SearchKeys, []byte(driver.LikePattern(prefix, suffix))
}
