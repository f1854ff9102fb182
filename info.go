package bq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/worker"
)

// JobState is where a job is. Live states are read from which execution
// table holds the job; finished jobs are completed, discarded or
// cancelled.
type JobState string

const (
	// StateScheduled: stored to run later; admitted when due.
	StateScheduled JobState = "scheduled"
	// StateReady: waiting for a worker, holding its key's slot if keyed.
	StateReady JobState = "ready"
	// StateBlocked: waiting for a slot of its concurrency key.
	StateBlocked JobState = "blocked"
	// StateRunning: claimed by a worker.
	StateRunning JobState = "running"
	// StateCompleted: finished successfully.
	StateCompleted JobState = "completed"
	// StateDiscarded: dropped, its key having no free slot (OnConflict
	// Discard, MaxBlocked), or discarded by hand.
	StateDiscarded JobState = "discarded"
	// StateFailed: spent its attempts or failed permanently.
	StateFailed JobState = "failed"
	// StateCancelled: cancelled by hand (Client.Cancel) or by itself
	// (returning bq.Cancel); a finished state, like completed.
	StateCancelled JobState = "cancelled"
)

// ErrJobNotFound is returned for a job id that does not exist (never
// enqueued, or deleted after its retention).
var ErrJobNotFound = errors.New("job not found")

// JobInfo is a stored job and its state. Its JSON (bq explain --json)
// is snake_case like bq's other reports, with Args as the JSON it is.
type JobInfo struct {
	ID          int64           `json:"id"`
	Kind        string          `json:"kind"`
	Queue       string          `json:"queue"`
	Args        json.RawMessage `json:"args"`
	Priority    int             `json:"priority"`
	State       JobState        `json:"state"`
	Attempts    int             `json:"attempts"` // attempts that have ended
	MaxAttempts int             `json:"max_attempts"`
	Key         string          `json:"key,omitempty"` // full concurrency key; "" when unkeyed
	// Keys is every concurrency key of a job with several
	// (MoreConcurrency), Key first; nil for one key or none.
	Keys []string `json:"keys,omitempty"`
	// RateKey is the full rate key (see Rate); "" when not rate-limited.
	RateKey     string     `json:"rate_key,omitempty"`
	Limit       int        `json:"limit,omitzero"`
	ScheduledAt time.Time  `json:"scheduled_at"`
	CreatedAt   time.Time  `json:"created_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	// Metadata and Tags are what WithMetadata, WithTags and
	// JobOptions.Tags attached; nil when none.
	Metadata map[string]string `json:"metadata,omitempty"`
	Tags     []string          `json:"tags,omitempty"`
}

// Job returns the job with id and its current state.
func (c *Client) Job(ctx context.Context, id int64) (*JobInfo, error) {
	info, ok, err := c.drv.Exec().JobGet(ctx, id)
	if err != nil {
		return nil, c.explainErr(ctx, err)
	}
	if !ok {
		return nil, fmt.Errorf("job %d: %w", id, ErrJobNotFound)
	}
	return jobInfoOf(info)
}

// jobInfoOf is the public face of a stored job.
func jobInfoOf(info *driver.JobInfo) (*JobInfo, error) {
	md, tags, err := worker.DecodeLabels(info.Metadata, info.Tags)
	if err != nil {
		return nil, fmt.Errorf("job %d: %w", info.ID, err)
	}
	var keys []string
	if len(info.More) > 0 {
		for _, l := range info.Keys() {
			keys = append(keys, l.Key)
		}
	}
	return &JobInfo{
		Keys: keys,
		ID:   info.ID, Kind: info.Kind, Queue: info.Queue, Args: info.Args, Priority: info.Priority,
		State: JobState(info.State), Attempts: info.Attempt, MaxAttempts: info.MaxAttempts,
		Key: info.Limit.Key, RateKey: info.Rate.Key, Limit: info.Limit.To, ScheduledAt: info.ScheduledAt,
		CreatedAt: info.CreatedAt, FinishedAt: info.FinishedAt, LastError: info.LastError,
		Metadata: md, Tags: tags,
	}, nil
}

// QueueStats counts one queue's jobs in each live state.
type QueueStats struct {
	Queue     string `json:"queue"`
	Ready     int    `json:"ready"`
	Running   int    `json:"running"`
	Scheduled int    `json:"scheduled"`
	Blocked   int    `json:"blocked"`
	Failed    int    `json:"failed"`
	// Paused: PauseQueue stopped its claims.
	Paused bool `json:"paused,omitzero"`
}

// QueueStats returns per-queue counts of ready, running, scheduled,
// blocked and failed jobs, and which queues are paused. A paused queue
// with no live jobs is listed too, with zero counts.
func (c *Client) QueueStats(ctx context.Context) ([]QueueStats, error) {
	counts, paused, err := queueCounts(ctx, c.drv.Exec())
	if err != nil {
		return nil, c.explainErr(ctx, err)
	}
	out := make([]QueueStats, len(counts))
	for i, q := range counts {
		out[i] = QueueStats{Queue: q.Queue, Ready: q.Ready, Running: q.Running, Scheduled: q.Scheduled,
			Blocked: q.Blocked, Failed: q.Failed, Paused: paused[q.Queue]}
	}
	return out, nil
}

// queueCounts counts every queue's jobs, with a zero row for each paused
// queue that has none, in queue order, and the set of paused queues.
func queueCounts(ctx context.Context, ex driver.Executor) ([]driver.QueueCounts, map[string]bool, error) {
	counts, err := ex.JobCountByQueue(ctx)
	if err != nil {
		return nil, nil, err
	}
	paused, err := pausedSet(ctx, ex)
	if err != nil {
		return nil, nil, err
	}
	n := len(counts)
	for q := range paused {
		if !slices.ContainsFunc(counts, func(c driver.QueueCounts) bool { return c.Queue == q }) {
			counts = append(counts, driver.QueueCounts{Queue: q})
		}
	}
	if len(counts) > n {
		slices.SortFunc(counts, func(a, b driver.QueueCounts) int { return strings.Compare(a.Queue, b.Queue) })
	}
	return counts, paused, nil
}
