// Package sqlhistory keeps the queue's per-minute history (see
// driver.HistoryStore) through database/sql, for the drivers that store
// times as Unix microseconds: SQLite and MySQL. Each driver supplies its
// own SQL and how it runs a write transaction.
package sqlhistory

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// DB is what *sql.DB and *sql.Tx have in common.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Queries are a driver's history statements, with the table prefix in.
// The multi-row inserts are split in three: Head up to VALUES, one Row's
// placeholders, and Tail (the upsert clause) after the last row.
type Queries struct {
	ThroughputHead, ThroughputRow, ThroughputTail string
	// ClaimMinute inserts the snapshot row of a minute (minute, taken
	// at) unless it exists, changing nothing then: 1 row affected or 0.
	ClaimMinute                         string
	DepthHead, DepthRow, DepthTail      string
	KeysHead, KeysRow                   string
	PruneRows, PruneKeys, PruneSnapshot string // (before, max)
	// Rows reads the minutes from a time on (from, limit), RowsOfQueue
	// those of one queue (from, queue, limit); Snapped and Keys (from,
	// limit).
	Rows, RowsOfQueue, Snapped, Keys string
	// SearchKeys reads key, value, lim, blocked, multi, duration_ms and
	// expires_at of the semaphores whose keys match a pattern, in key
	// order (pattern, limit): the key search (driver.KeySearcher).
	SearchKeys string
}

// Store runs one driver's history statements.
type Store struct {
	DB DB
	Q  *Queries
	// Atomic runs fn inside a write transaction: the current one, or one
	// of its own.
	Atomic func(ctx context.Context, fn func(DB) error) error
	// Text is how a queue name or key is passed: []byte on MySQL, whose
	// columns are VARBINARY.
	Text func(s string) any
}

// maxRows bounds the rows of one multi-row INSERT.
const maxRows = 100

func micros(t time.Time) int64 { return t.UnixMicro() }

// insert runs head + rows + tail over values (width a row), maxRows rows
// a statement: a flush or a snapshot is one statement unless it has
// more rows than that.
func insert(ctx context.Context, db DB, head, row, tail string, width int, values []any) error {
	for len(values) > 0 {
		n := min(len(values)/width, maxRows)
		query := head + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ") + tail
		if _, err := db.ExecContext(ctx, query, values[:n*width]...); err != nil {
			return err
		}
		values = values[n*width:]
	}
	return nil
}

func (s Store) AddThroughput(ctx context.Context, counts []driver.Throughput) error {
	if len(counts) == 0 {
		return nil
	}
	values := make([]any, 0, 4*len(counts))
	for _, c := range counts {
		values = append(values, micros(c.Minute), s.Text(c.Queue), c.Completed, c.Failed)
	}
	err := s.Atomic(ctx, func(db DB) error {
		return insert(ctx, db, s.Q.ThroughputHead, s.Q.ThroughputRow, s.Q.ThroughputTail, 4, values)
	})
	if err != nil {
		return fmt.Errorf("add to the history's throughput: %w", err)
	}
	return nil
}

func (s Store) SnapshotHistory(ctx context.Context, snap driver.HistorySnapshot) (bool, error) {
	minute := micros(snap.Minute)
	var wrote bool
	err := s.Atomic(ctx, func(db DB) error {
		res, err := db.ExecContext(ctx, s.Q.ClaimMinute, minute, micros(snap.TakenAt))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // another dispatcher took this minute
		}
		wrote = true
		depth := make([]any, 0, 6*len(snap.Queues))
		for _, q := range snap.Queues {
			depth = append(depth, minute, s.Text(q.Queue), q.Ready, q.Running, q.Blocked, q.Scheduled)
		}
		if err := insert(ctx, db, s.Q.DepthHead, s.Q.DepthRow, s.Q.DepthTail, 6, depth); err != nil {
			return err
		}
		keys := make([]any, 0, 4*len(snap.Keys))
		for i, k := range snap.Keys {
			keys = append(keys, minute, i+1, s.Text(k.Key), k.Blocked)
		}
		return insert(ctx, db, s.Q.KeysHead, s.Q.KeysRow, "", 4, keys)
	})
	if err != nil {
		return false, fmt.Errorf("snapshot the history of %s: %w", snap.Minute.UTC().Format(time.RFC3339), err)
	}
	return wrote, nil
}

func (s Store) PruneHistory(ctx context.Context, before time.Time, max int) (int, error) {
	var deleted int64
	err := s.Atomic(ctx, func(db DB) error {
		deleted = 0
		for _, q := range []string{s.Q.PruneRows, s.Q.PruneKeys, s.Q.PruneSnapshot} {
			res, err := db.ExecContext(ctx, q, micros(before), max)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			deleted += n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune the history: %w", err)
	}
	return int(deleted), nil
}

func (s Store) ReadHistory(ctx context.Context, from time.Time, queue string) (driver.History, error) {
	var h driver.History
	query, args := s.Q.Rows, []any{micros(from), driver.HistoryMinutes}
	if queue != "" {
		query, args = s.Q.RowsOfQueue, []any{micros(from), s.Text(queue), driver.HistoryMinutes}
	}
	err := each(ctx, s.DB, query, args, func(rows *sql.Rows) error {
		var r driver.HistoryRow
		var minute int64
		err := rows.Scan(&minute, &r.Completed, &r.Failed, &r.Ready, &r.Running, &r.Blocked, &r.Scheduled)
		r.Minute = time.UnixMicro(minute)
		h.Rows = append(h.Rows, r)
		return err
	})
	if err == nil {
		err = each(ctx, s.DB, s.Q.Snapped, []any{micros(from), driver.HistoryMinutes}, func(rows *sql.Rows) error {
			var minute int64
			err := rows.Scan(&minute)
			h.Snapped = append(h.Snapped, time.UnixMicro(minute))
			return err
		})
	}
	if err == nil {
		err = each(ctx, s.DB, s.Q.Keys, []any{micros(from), driver.HistoryMinutes * driver.MaxHistoryKeys}, func(rows *sql.Rows) error {
			var k driver.HistoryKey
			var minute int64
			err := rows.Scan(&minute, &k.Key, &k.Blocked)
			k.Minute = time.UnixMicro(minute)
			h.Keys = append(h.Keys, k)
			return err
		})
	}
	if err != nil {
		return driver.History{}, fmt.Errorf("read the history: %w", err)
	}
	return h, nil
}

// each calls scan for every row of query.
func each(ctx context.Context, db DB, query string, args []any, scan func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Statements both dialects spell alike, with {p} for the table prefix.
const (
	ThroughputHead = `INSERT INTO {p}history (minute, queue, completed, failed) VALUES `
	DepthHead      = `INSERT INTO {p}history (minute, queue, ready, running, blocked, scheduled) VALUES `
	Snapped        = `SELECT minute FROM {p}history_snapshots WHERE minute >= ? ORDER BY minute LIMIT ?`
)

// RowsSQL returns the Rows and RowsOfQueue statements, each column summed
// with sum (MySQL's SUM is DECIMAL unless cast).
func RowsSQL(sum func(col string) string) (all, ofQueue string) {
	cols := make([]string, 0, 6)
	for _, c := range []string{"completed", "failed", "ready", "running", "blocked", "scheduled"} {
		cols = append(cols, sum(c))
	}
	head := "SELECT minute, " + strings.Join(cols, ", ") + " FROM {p}history WHERE minute >= ?"
	tail := " GROUP BY minute ORDER BY minute LIMIT ?"
	return head + tail, head + " AND queue = ?" + tail
}
