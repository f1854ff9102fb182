package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// watchEvery is how often Listen reads the signal counters.
const watchEvery = 50 * time.Millisecond

// MySQL has no LISTEN/NOTIFY. Notify bumps one counter row per queue in
// the signals table; Listen reads that small table every watchEvery and
// wakes the queues whose counter moved. A read of a few primary-key rows
// stands in for each worker's claim transaction on every poll.

func (d *Driver) notify(ctx context.Context, db dbtx, queues []string) error {
	q := "INSERT INTO " + d.prefix + "signals (queue, seq) VALUES (?, 1) ON DUPLICATE KEY UPDATE seq = seq + 1"
	for _, queue := range queues {
		if _, err := db.ExecContext(ctx, q, []byte(queue)); err != nil {
			return fmt.Errorf("signal queue %q: %w", queue, err)
		}
	}
	return nil
}

// Notify signals queues outside any transaction.
func (d *Driver) Notify(ctx context.Context, queues []string) error {
	return d.notify(ctx, d.db, queues)
}

// NotifyTx signals inside the caller's *sql.Tx: listeners see it only if
// it commits.
func (d *Driver) NotifyTx(ctx context.Context, tx any, queues []string) error {
	t, ok := tx.(*sql.Tx)
	if !ok {
		return fmt.Errorf("signal in a %T: want a *sql.Tx", tx)
	}
	return d.notify(ctx, t, queues)
}

// Listen calls ready for each queue whose counter moved, until ctx ends.
func (d *Driver) Listen(ctx context.Context, ready func(queue string), failed func(error)) error {
	q := "SELECT queue, seq FROM " + d.prefix + "signals"
	seen := map[string]int64{}
	first := true
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		rows, err := d.db.QueryContext(ctx, q)
		if err != nil {
			if ctx.Err() == nil {
				failed(err)
			}
			continue
		}
		for rows.Next() {
			var queue string
			var seq int64
			if err := rows.Scan(&queue, &seq); err != nil {
				failed(err)
				break
			}
			if last, ok := seen[queue]; !first && (!ok || last != seq) {
				ready(queue)
			}
			seen[queue] = seq
		}
		rows.Close()
		first = false
	}
}
