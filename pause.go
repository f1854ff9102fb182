package bq

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// PauseQueue stops every process from claiming jobs of queue, within one
// poll, until ResumeQueue; the pause is stored in the database, so it
// needs no deploy and survives restarts. Enqueues still succeed. Jobs
// already running finish; ready jobs of keyed limits keep their slots
// while paused (docs/limits.md). Pausing a paused queue changes nothing,
// and a queue no job uses yet may be paused ahead of its first job.
func (c *Client) PauseQueue(ctx context.Context, queue string) error {
	if err := validateQueue(queue); err != nil {
		return fmt.Errorf("%w: PauseQueue: %w", ErrInvalidArgument, err)
	}
	if _, err := c.drv.Exec().QueuePause(ctx, queue, c.cfg.Now()); err != nil {
		return c.explainErr(ctx, err)
	}
	return nil
}

// ResumeQueue lets queue's jobs be claimed again and wakes the workers of
// queue in every process, so they claim at once rather than at their next
// poll. Resuming a queue that is not paused changes nothing.
func (c *Client) ResumeQueue(ctx context.Context, queue string) error {
	if err := validateQueue(queue); err != nil {
		return fmt.Errorf("%w: ResumeQueue: %w", ErrInvalidArgument, err)
	}
	if _, err := c.drv.Exec().QueueResume(ctx, queue); err != nil {
		return c.explainErr(ctx, err)
	}
	c.rt.Ready(queue)
	return nil
}

// PausedQueue is a queue PauseQueue stopped.
type PausedQueue struct {
	Queue    string    `json:"queue"`
	PausedAt time.Time `json:"paused_at"`
}

// PausedQueues lists the paused queues, ordered by name.
func (c *Client) PausedQueues(ctx context.Context) ([]PausedQueue, error) {
	rows, err := c.drv.Exec().QueueListPaused(ctx)
	if err != nil {
		return nil, fmt.Errorf("paused queues: %w", c.explainErr(ctx, err))
	}
	out := make([]PausedQueue, len(rows))
	for i, p := range rows {
		out[i] = PausedQueue(p)
	}
	return out, nil
}

// pausedSet reads the paused queues as a set, for the reports that mark them.
func pausedSet(ctx context.Context, ex driver.PauseStore) (map[string]bool, error) {
	rows, err := ex.QueueListPaused(ctx)
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(rows))
	for _, p := range rows {
		set[p.Queue] = true
	}
	return set, nil
}
