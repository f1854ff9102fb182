package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (e *executor) ProcessHeartbeat(ctx context.Context, b driver.Beat) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.heartbeat, b.ProcessID, b.At, b.BeatingSince)
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

func (e *executor) SemaphoreRenewHeld(ctx context.Context, processID int64, at time.Time, renewBelow float64) error {
	if _, err := e.db.Exec(ctx, e.q.renewSems, processID, at, renewBelow); err != nil {
		return fmt.Errorf("renew semaphores: %w", err)
	}
	return nil
}

func (e *executor) ProcessDeleteDead(ctx context.Context, now time.Time, deadAfter time.Duration) (int, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteDeadProcesses, now, deadAfter.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("delete dead processes: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
