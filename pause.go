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
// and a queue no job uses yet may be paused ahead of its first job: when
// no job kind defined in this process, no queue of Config.Queues and no
// stored job uses it, PauseQueue pauses it and logs a warning, since the
// name may be a typo of the queue meant.
func (c *Client) PauseQueue(ctx context.Context, queue string) error {
	if err := validateQueue(queue); err != nil {
		return fmt.Errorf("%w: PauseQueue: %w", ErrInvalidArgument, err)
	}
	if _, err := c.drv.Exec().QueuePause(ctx, queue, c.cfg.Now()); err != nil {
		return c.explainErr(ctx, err)
	}
	if !c.queueUsed(ctx, queue) {
		c.log.Warn(fmt.Sprintf("PauseQueue(%q): no job kind defined in this process and no stored job uses the queue; it is paused anyway, ahead of its first job: check the name if you meant another queue", queue),
			"queue", queue)
	}
	return nil
}

// queueUsed reports whether a job kind defined in this process, the
// client's Config.Queues or a stored job (one look at the jobs' queue
// index) uses queue; true when the look fails: the warning it would
// feed is no reason to fail a pause that is done.
func (c *Client) queueUsed(ctx context.Context, queue string) bool {
	if _, ok := c.cfg.Queues[queue]; ok {
		return true
	}
	if _, ok := defined.queues()[queue]; ok {
		return true
	}
	page, err := c.ListJobs(ctx, JobFilter{Queues: []string{queue}, Limit: 1})
	return err != nil || len(page.Jobs) > 0
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
