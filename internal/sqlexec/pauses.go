package sqlexec

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (s Shared) QueuePause(ctx context.Context, queue string, now time.Time) (bool, error) {
	n, err := s.c.Write(ctx, s.q.PauseQueue, s.c.Text(queue), s.c.Time(now))
	if err != nil {
		return false, fmt.Errorf("pause queue %q: %w", queue, err)
	}
	return n == 1, nil
}

func (s Shared) QueueResume(ctx context.Context, queue string) (bool, error) {
	n, err := s.c.Write(ctx, s.q.ResumeQueue, s.c.Text(queue))
	if err != nil {
		return false, fmt.Errorf("resume queue %q: %w", queue, err)
	}
	return n == 1, nil
}

func (s Shared) QueueListPaused(ctx context.Context) ([]driver.PausedQueue, error) {
	out, err := collect(ctx, s.c, func(r Row) (p driver.PausedQueue, err error) {
		err = r.Scan(&p.Queue, At(&p.PausedAt))
		return p, err
	}, s.q.PausedQueues)
	if err != nil {
		return nil, fmt.Errorf("list paused queues: %w", err)
	}
	return out, nil
}
