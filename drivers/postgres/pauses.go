package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
)

func (e *executor) PauseQueue(ctx context.Context, queue string, now time.Time) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.pauseQueue, queue, now)
	if err != nil {
		return false, fmt.Errorf("pause queue %q: %w", queue, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) ResumeQueue(ctx context.Context, queue string) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.resumeQueue, queue)
	if err != nil {
		return false, fmt.Errorf("resume queue %q: %w", queue, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) PausedQueues(ctx context.Context) ([]driver.PausedQueue, error) {
	out, err := collect(ctx, e.db, pgx.RowToStructByPos[driver.PausedQueue], e.q.pausedQueues)
	if err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	return out, nil
}
