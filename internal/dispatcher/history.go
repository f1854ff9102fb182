package dispatcher

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// The history (driver.HistoryStore): once a minute each dispatcher reads
// the depth of every queue and the most blocked keys and offers them as
// the minute's snapshot; the first to write it wins, so several
// dispatchers record each minute once. Clean-up prunes what is older
// than driver.HistoryKeep, a bounded batch per pass.

// snapshotHistory snapshots the current minute unless this dispatcher
// already has.
func (d *Dispatcher) snapshotHistory(ctx context.Context) error {
	hs, ok := driver.HistoryOf(d.drv)
	if !ok {
		return nil
	}
	now := d.cfg.Now()
	minute := now.Truncate(time.Minute)
	if !minute.After(d.snapped) {
		return nil
	}
	ex := d.drv.Exec()
	queues, err := ex.JobCountByQueue(ctx)
	if err != nil {
		return fmt.Errorf("snapshot the history: %w", err)
	}
	keys, err := ex.SemaphoreListMostBlocked(ctx, driver.MaxHistoryKeys)
	if err != nil {
		return fmt.Errorf("snapshot the history: %w", err)
	}
	wrote, err := hs.HistoryInsertSnapshot(ctx, driver.HistorySnapshot{Minute: minute, TakenAt: now, Queues: queues, Keys: keys})
	if err != nil {
		return err
	}
	d.snapped = minute
	if wrote {
		d.cfg.Logger.Debug("snapshotted the history", "minute", minute, "queues", len(queues), "keys", len(keys))
	}
	return nil
}

// pruneHistory deletes up to BatchSize rows of each history table that
// are older than the history keeps.
func (d *Dispatcher) pruneHistory(ctx context.Context, now time.Time) error {
	hs, ok := driver.HistoryOf(d.drv)
	if !ok {
		return nil
	}
	_, err := hs.HistoryPrune(ctx, now.Add(-driver.HistoryKeep), d.cfg.BatchSize)
	return err
}
