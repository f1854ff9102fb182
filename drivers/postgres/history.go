package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
)

// The history (driver.HistoryStore).

var _ driver.HistoryStore = (*executor)(nil)

type historyQueries struct {
	addThroughput, snapshot, prune string
	rows, rowsOfQueue, snapped     string
	keys, searchKeys               string
}

const historyRows = `SELECT minute, sum(completed)::bigint, sum(failed)::bigint, sum(ready)::bigint,
	sum(running)::bigint, sum(blocked)::bigint, sum(scheduled)::bigint
FROM {p}history WHERE minute >= $1`

func newHistoryQueries(p func(string) string) historyQueries {
	return historyQueries{
		addThroughput: p(`INSERT INTO {p}history (minute, queue, completed, failed)
SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::bigint[], $4::bigint[])
ON CONFLICT (minute, queue) DO UPDATE SET completed = {p}history.completed + excluded.completed,
	failed = {p}history.failed + excluded.failed`),
		// One statement: the depth and the keys are written only if this
		// statement inserted the minute's snapshot row. A second
		// dispatcher's insert waits for the first's to commit, then
		// inserts nothing.
		snapshot: p(`
WITH taken AS (
	INSERT INTO {p}history_snapshots (minute, taken_at) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING minute
), depth AS (
	INSERT INTO {p}history (minute, queue, ready, running, blocked, scheduled)
	SELECT taken.minute, d.* FROM taken, unnest($3::text[], $4::int[], $5::int[], $6::int[], $7::int[]) AS d
	ON CONFLICT (minute, queue) DO UPDATE SET ready = excluded.ready, running = excluded.running,
		blocked = excluded.blocked, scheduled = excluded.scheduled
), keys AS (
	INSERT INTO {p}history_keys (minute, rank, key, blocked)
	SELECT taken.minute, k.ord, k.key, k.blocked
	FROM taken, unnest($8::text[], $9::int[]) WITH ORDINALITY AS k(key, blocked, ord)
)
SELECT count(*) FROM taken`),
		prune: p(`
WITH q AS (
	DELETE FROM {p}history WHERE (minute, queue) IN (
		SELECT minute, queue FROM {p}history WHERE minute < $1 ORDER BY minute LIMIT $2) RETURNING 1
), k AS (
	DELETE FROM {p}history_keys WHERE (minute, rank) IN (
		SELECT minute, rank FROM {p}history_keys WHERE minute < $1 ORDER BY minute LIMIT $2) RETURNING 1
), s AS (
	DELETE FROM {p}history_snapshots WHERE minute IN (
		SELECT minute FROM {p}history_snapshots WHERE minute < $1 ORDER BY minute LIMIT $2) RETURNING 1
)
SELECT (SELECT count(*) FROM q) + (SELECT count(*) FROM k) + (SELECT count(*) FROM s)`),
		rows:        p(historyRows + ` GROUP BY minute ORDER BY minute LIMIT $2`),
		rowsOfQueue: p(historyRows + ` AND queue = $3 GROUP BY minute ORDER BY minute LIMIT $2`),
		snapped:     p(`SELECT minute FROM {p}history_snapshots WHERE minute >= $1 ORDER BY minute LIMIT $2`),
		keys:        p(`SELECT minute, key, blocked FROM {p}history_keys WHERE minute >= $1 ORDER BY minute, rank LIMIT $2`),
		// Byte order, as on the other databases, whatever the
		// database's collation; LIKE never folds case.
		searchKeys: p(`SELECT key, value, lim, blocked, multi, duration_ms, expires_at FROM {p}semaphores
WHERE key LIKE $1 ESCAPE '!' ORDER BY key COLLATE "C" LIMIT $2`),
	}
}

func (e *executor) HistoryAddThroughput(ctx context.Context, counts []driver.Throughput) error {
	if len(counts) == 0 {
		return nil
	}
	minutes, queues := make([]time.Time, len(counts)), make([]string, len(counts))
	completed, failed := make([]int64, len(counts)), make([]int64, len(counts))
	for i, c := range counts {
		minutes[i], queues[i], completed[i], failed[i] = c.Minute, c.Queue, int64(c.Completed), int64(c.Failed)
	}
	if _, err := e.db.Exec(ctx, e.q.history.addThroughput, minutes, queues, completed, failed); err != nil {
		return fmt.Errorf("add to the history's throughput: %w", err)
	}
	return nil
}

func (e *executor) HistoryInsertSnapshot(ctx context.Context, s driver.HistorySnapshot) (bool, error) {
	n := len(s.Queues)
	queues, ready, running, blocked, scheduled := make([]string, n), make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	for i, q := range s.Queues {
		queues[i], ready[i], running[i], blocked[i], scheduled[i] = q.Queue, int32(q.Ready), int32(q.Running), int32(q.Blocked), int32(q.Scheduled)
	}
	keys, keyBlocked := make([]string, len(s.Keys)), make([]int32, len(s.Keys))
	for i, k := range s.Keys {
		keys[i], keyBlocked[i] = k.Key, int32(k.Blocked)
	}
	var taken int
	err := e.db.QueryRow(ctx, e.q.history.snapshot, s.Minute, s.TakenAt, queues, ready, running, blocked, scheduled,
		keys, keyBlocked).Scan(&taken)
	if err != nil {
		return false, fmt.Errorf("snapshot the history of %s: %w", s.Minute.UTC().Format(time.RFC3339), err)
	}
	return taken == 1, nil
}

func (e *executor) HistoryPrune(ctx context.Context, before time.Time, max int) (int, error) {
	var n int
	if err := e.db.QueryRow(ctx, e.q.history.prune, before, max).Scan(&n); err != nil {
		return 0, fmt.Errorf("prune the history: %w", err)
	}
	return n, nil
}

func (e *executor) HistoryList(ctx context.Context, from time.Time, queue string) (driver.History, error) {
	var h driver.History
	query, args := e.q.history.rows, []any{from, driver.HistoryMinutes}
	if queue != "" {
		args = append(args, queue)
		query = e.q.history.rowsOfQueue
	}
	err := e.collect(ctx, query, args, func(r pgx.CollectableRow) error {
		var row driver.HistoryRow
		err := r.Scan(&row.Minute, &row.Completed, &row.Failed, &row.Ready, &row.Running, &row.Blocked, &row.Scheduled)
		h.Rows = append(h.Rows, row)
		return err
	})
	if err == nil {
		err = e.collect(ctx, e.q.history.snapped, []any{from, driver.HistoryMinutes}, func(r pgx.CollectableRow) error {
			var minute time.Time
			err := r.Scan(&minute)
			h.Snapped = append(h.Snapped, minute)
			return err
		})
	}
	if err == nil {
		err = e.collect(ctx, e.q.history.keys, []any{from, driver.HistoryMinutes * driver.MaxHistoryKeys}, func(r pgx.CollectableRow) error {
			var k driver.HistoryKey
			err := r.Scan(&k.Minute, &k.Key, &k.Blocked)
			h.Keys = append(h.Keys, k)
			return err
		})
	}
	if err != nil {
		return driver.History{}, fmt.Errorf("read the history: %w", err)
	}
	return h, nil
}

// collect calls scan for every row of query.
func (e *executor) collect(ctx context.Context, query string, args []any, scan func(pgx.CollectableRow) error) error {
	rows, err := e.db.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	_, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) { return struct{}{}, scan(r) })
	return err
}
