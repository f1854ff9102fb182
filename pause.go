package bq

import (
	"context"
	"fmt"
	"slices"
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

// PauseKey stops every process from claiming jobs of the full key (a
// job's concurrency key, bq.Key(group, key), whichever of its keys it
// is) until ResumeKey: one tenant, one downstream API, paused while the
// rest of its queues run. The pause is stored in the database, so it
// needs no deploy and survives restarts; it applies to every claim begun
// after it commits, as a queue's pause does. Enqueues still succeed;
// jobs already running finish and release their slots, which promote
// the key's blocked jobs to ready as usual: its ready jobs keep their
// slots and its blocked jobs their places in line. Pausing a paused key
// changes nothing.
func (c *Client) PauseKey(ctx context.Context, key string) error {
	if err := checkFullKeyArg("PauseKey", key); err != nil {
		return err
	}
	if _, err := c.drv.Exec().KeyPause(ctx, key, c.cfg.Now()); err != nil {
		return fmt.Errorf("pause key %q: %w", key, c.explainErr(ctx, err))
	}
	return nil
}

// ResumeKey lets the key's jobs be claimed again and wakes the workers of
// the queues its ready jobs wait in, in every process. Resuming a key
// that is not paused changes nothing.
func (c *Client) ResumeKey(ctx context.Context, key string) error {
	if err := checkFullKeyArg("ResumeKey", key); err != nil {
		return err
	}
	ex := c.drv.Exec()
	if _, err := ex.KeyResume(ctx, key); err != nil {
		return fmt.Errorf("resume key %q: %w", key, c.explainErr(ctx, err))
	}
	ready, err := ex.JobList(ctx, driver.JobFilter{Key: key, States: []driver.JobState{driver.StateReady}, Max: 1000})
	if err != nil {
		// Resumed: the workers find its jobs at their next poll.
		c.log.Warn("key resumed; waking its workers failed: they claim its jobs at their next poll", "key", key, "error", err)
		return nil
	}
	var queues []string
	for _, j := range ready {
		if !slices.Contains(queues, j.Queue) {
			queues = append(queues, j.Queue)
		}
	}
	c.rt.ReadyAll(queues)
	return nil
}

// PausedKey is a key PauseKey stopped.
type PausedKey struct {
	Key      string    `json:"key"`
	PausedAt time.Time `json:"paused_at"`
}

// PausedKeys lists the paused keys, ordered by key.
func (c *Client) PausedKeys(ctx context.Context) ([]PausedKey, error) {
	rows, err := c.drv.Exec().KeyListPaused(ctx)
	if err != nil {
		return nil, fmt.Errorf("paused keys: %w", c.explainErr(ctx, err))
	}
	out := make([]PausedKey, len(rows))
	for i, p := range rows {
		out[i] = PausedKey(p)
	}
	return out, nil
}

// keyPausedSummary adds to summary, Explain's of a ready or blocked job,
// that one of its keys is paused, when one is.
func keyPausedSummary(ctx context.Context, ex driver.PauseStore, info *JobInfo, summary string, now time.Time) (string, error) {
	if info.Key == "" {
		return summary, nil
	}
	keys, err := ex.KeyListPaused(ctx)
	if err != nil {
		return summary, err
	}
	for _, k := range keys {
		if k.Key == info.Key || slices.Contains(info.Keys, k.Key) {
			return summary + fmt.Sprintf(" Its key %q is paused since %s: no process claims its jobs until it is resumed (client.ResumeKey or `bq key resume`).",
				k.Key, when(k.PausedAt, now)), nil
		}
	}
	return summary, nil
}
