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

func (s Shared) KeyPause(ctx context.Context, key string, now time.Time) (bool, error) {
	if err := s.c.CheckKey(key); err != nil {
		return false, fmt.Errorf("pause key: %w", err)
	}
	n, err := s.c.Write(ctx, s.q.PauseKey, append(s.c.KeyArgs(key), s.c.Time(now))...)
	if err != nil {
		return false, fmt.Errorf("pause key %q: %w", key, err)
	}
	return n == 1, nil
}

func (s Shared) KeyResume(ctx context.Context, key string) (bool, error) {
	n, err := s.c.Write(ctx, s.q.ResumeKey, s.c.KeyArgs(key)...)
	if err != nil {
		return false, fmt.Errorf("resume key %q: %w", key, err)
	}
	return n == 1, nil
}

func (s Shared) KeyListPaused(ctx context.Context) ([]driver.PausedKey, error) {
	out, err := collect(ctx, s.c, func(r Row) (p driver.PausedKey, err error) {
		err = r.Scan(&p.Key, At(&p.PausedAt))
		return p, err
	}, s.q.PausedKeys)
	if err != nil {
		return nil, fmt.Errorf("list paused keys: %w", err)
	}
	return out, nil
}
