package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (e *Executor) PauseQueue(ctx context.Context, queue string, now time.Time) (bool, error) {
	n, err := e.exec(ctx, e.q.PauseQueue, e.d.Text(queue), Micros(now))
	if err != nil {
		return false, fmt.Errorf("pause queue %q: %w", queue, err)
	}
	return n == 1, nil
}

func (e *Executor) ResumeQueue(ctx context.Context, queue string) (bool, error) {
	n, err := e.exec(ctx, e.q.ResumeQueue, e.d.Text(queue))
	if err != nil {
		return false, fmt.Errorf("resume queue %q: %w", queue, err)
	}
	return n == 1, nil
}

func (e *Executor) PausedQueues(ctx context.Context) ([]driver.PausedQueue, error) {
	out, err := Collect(ctx, e.db, func(rows *sql.Rows) (p driver.PausedQueue, err error) {
		var at int64
		err = rows.Scan(&p.Queue, &at)
		p.PausedAt = FromMicros(at)
		return p, err
	}, e.q.PausedQueues)
	if err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	return out, nil
}
