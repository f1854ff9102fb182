package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/sqlexec"
)

// pruneWork is what one prune deletes: the ids from `from` to `to` but
// those to keep (read by this listener too lately, or not at all), and,
// below `from`, rows created before `abandoned`.
type pruneWork struct {
	from, to  int64
	keep      []gap
	abandoned int64
}

type pruneResult struct {
	last int64 // the ids up to last are done with (0: none)
	keep []gap
	err  error
}

func (l *listener) pruneJob(now time.Time) pruneWork {
	w := pruneWork{from: l.t.lo, to: -1, abandoned: sqlexec.Micros(now.Add(-abandonAfter))}
	if from, to, keep, ok := l.t.pruneRange(now); ok {
		w.from, w.to, w.keep = from, to, keep
	}
	return w
}

// prune deletes what w says. It never waits: rows are picked with SKIP
// LOCKED at READ COMMITTED (no gap locks, so no insert waits on the
// range), and deleted one by one by primary key. A DELETE of an id list or
// range may be planned as a table scan, which waits on the row of every
// open transaction that signalled.
func (l *listener) prune(ctx context.Context, w pruneWork) pruneResult {
	r := pruneResult{keep: w.keep}
	if w.to >= w.from {
		done, last, err := l.deleteRows(ctx, w.from, w.to, w.keep, 0)
		if err != nil {
			r.err = fmt.Errorf("prune the signal log: %w", err)
			return r
		}
		r.last = last
		if done {
			r.last = w.to
		}
	}
	if w.from > 1 {
		if _, _, err := l.deleteRows(ctx, 0, w.from-1, nil, w.abandoned); err != nil {
			r.err = fmt.Errorf("prune abandoned rows of the signal log: %w", err)
		}
	}
	return r
}

// deleteRows deletes up to 10 batches of the rows with ids from `from` to
// `to`, but those to keep; with before set, only the rows created before
// it, stopping at the first younger one. done says the range holds no row
// left to delete (but locked, kept or younger ones); last is the highest
// id the deletion got to.
func (l *listener) deleteRows(ctx context.Context, from, to int64, keep []gap, before int64) (done bool, last int64, err error) {
	for range 10 {
		seen, more, err := l.deleteBatch(ctx, from, to, keep, before)
		if err != nil {
			return false, last, err
		}
		if seen > 0 {
			last = seen
			from = last + 1
		}
		if !more {
			return true, last, nil
		}
	}
	return false, last, nil
}

// deleteBatch deletes one batch for deleteRows: seen is the highest id it
// got to, more says the batch was full and more rows may follow.
func (l *listener) deleteBatch(ctx context.Context, from, to int64, keep []gap, before int64) (seen int64, more bool, err error) {
	tx, err := l.d.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, false, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	rows, err := tx.QueryContext(ctx, "SELECT id, created_at FROM "+l.d.prefix+
		"signal_log WHERE id BETWEEN ? AND ? ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED", from, to, maxRows)
	if err != nil {
		return 0, false, err
	}
	var ids []int64
	n, young := 0, false
	for rows.Next() {
		var id, created int64
		if err = rows.Scan(&id, &created); err != nil {
			rows.Close()
			return 0, false, err
		}
		n++
		if before != 0 && created >= before {
			// Rows come in id order, about the order they were made in:
			// the rest are younger still.
			young = true
			break
		}
		seen = id
		if _, kept := findGap(keep, id); !kept {
			ids = append(ids, id)
		}
	}
	rows.Close()
	if err = rows.Err(); err != nil {
		return 0, false, err
	}
	del := "DELETE FROM " + l.d.prefix + "signal_log WHERE id = ?"
	for _, id := range ids {
		if _, err = tx.ExecContext(ctx, del, id); err != nil {
			return 0, false, err
		}
	}
	if err = tx.Commit(); err != nil {
		return 0, false, err
	}
	return seen, n == maxRows && !young, nil
}
