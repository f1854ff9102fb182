package bq

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
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
	// StateWaiting: waiting for the jobs it depends on (DependsOn) to
	// finish; it holds no slot, rate start or place in a line until then.
	StateWaiting JobState = "waiting"
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
	// Slots is how many slots of each of its keys the job takes
	// (JobOptions.Slots); 1 for most jobs.
	Slots       int        `json:"slots"`
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
	// Sequence: its key is a sequence (Concurrency.Sequence); HoldsSlot:
	// it is scheduled for a retry (or a snooze), or failed in a sequence
	// that halts (SequenceHaltOnFailure), keeping its key's slot, so the
	// next job of the sequence waits for it.
	Sequence  bool `json:"sequence,omitzero"`
	HoldsSlot bool `json:"holds_slot,omitzero"`
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
		Key: info.Limit.Key, Slots: driver.SlotsOf(info.Slots), RateKey: info.Rate.Key, Limit: info.Limit.To, ScheduledAt: info.ScheduledAt,
		CreatedAt: info.CreatedAt, FinishedAt: info.FinishedAt, LastError: info.LastError,
		Metadata: md, Tags: tags, Sequence: info.Limit.Sequence, HoldsSlot: info.SlotHeld && (info.State == driver.StateScheduled || info.State == driver.StateFailed),
	}, nil
}

// ListJobs pages, the default and the most a page holds.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
)

// maxFilterItems bounds each list of a JobFilter (Kinds, Queues).
const maxFilterItems = 100

// JobFilter selects jobs for ListJobs. Every field that is set must
// match; a zero JobFilter lists every job, newest first.
type JobFilter struct {
	// Kinds and Queues: a job of any of them.
	Kinds  []string
	Queues []string
	// States: a job in any of them (StateCompleted is finished, neither
	// discarded nor cancelled).
	States []JobState
	// Key is a full concurrency key (Group + "/" + Key), matched
	// exactly against every key of a job (a job with several keys,
	// MoreConcurrency, is found by any of them); KeyPrefix matches the
	// jobs whose first key (Concurrency's) starts with it, byte for byte
	// ("billing/" for a group, "billing/acme-" for some keys). Set one of
	// them at most.
	Key       string
	KeyPrefix string
	// Metadata: jobs whose metadata holds every pair.
	Metadata map[string]string
	// Tag: jobs carrying it.
	Tag string
	// Time ranges: After is at or after, Before strictly before; a zero
	// time is no bound.
	CreatedAfter, CreatedBefore   time.Time
	FinishedAfter, FinishedBefore time.Time
	// Limit is the page size: default DefaultListLimit, at most
	// MaxListLimit.
	Limit int
	// After is the Next of the previous page: the page after it. Pages
	// are stable under inserts: new jobs go to the front of the first
	// page, never into a later one.
	After string
}

// JobPage is one page of ListJobs, newest job first.
type JobPage struct {
	Jobs []*JobInfo `json:"jobs"`
	// Next is the After of the following page; "" on the last.
	Next string `json:"next,omitempty"`
}

// ErrInvalidFilter wraps every problem with a JobFilter.
var ErrInvalidFilter = errors.New("invalid job filter")

// allStates are the states a filter may name, in the order of a job's life
// (waiting, which comes before the others, last: it came last).
var allStates = []JobState{StateScheduled, StateBlocked, StateReady, StateRunning,
	StateFailed, StateCompleted, StateDiscarded, StateCancelled, StateWaiting}

// ParseJobState reads a state's name, naming the valid ones if s is none.
func ParseJobState(s string) (JobState, error) {
	if st := JobState(strings.ToLower(strings.TrimSpace(s))); slices.Contains(allStates, st) {
		return st, nil
	}
	names := make([]string, len(allStates))
	for i, st := range allStates {
		names[i] = string(st)
	}
	return "", fmt.Errorf("unknown job state %s: use one of %s", quoted(s), strings.Join(names, ", "))
}

// ListJobs returns a page of the jobs f selects, newest first; pass the
// page's Next as f.After for the next one. Every filter the dashboard
// offers is served by an index (docs/observability.md, "Listing jobs").
func (c *Client) ListJobs(ctx context.Context, f JobFilter) (JobPage, error) {
	return c.listJobs(ctx, c.drv.Exec(), f)
}

// ListJobsTx is ListJobs read through tx, your transaction wrapped by
// its driver (postgres.Tx(tx), mysql.Tx(tx), sqlite.Tx(tx)): it sees the
// jobs tx enqueued and has not committed yet, and none that another
// transaction enqueued after tx's snapshot (where the database keeps
// one, as PostgreSQL's REPEATABLE READ does).
func (c *Client) ListJobsTx(ctx context.Context, tx Tx, f JobFilter) (JobPage, error) {
	raw, err := unwrapTx(c, tx, "ListJobsTx")
	if err != nil {
		return JobPage{}, err
	}
	ex, err := c.drv.WrapTx(raw)
	if err != nil {
		return JobPage{}, fmt.Errorf("ListJobsTx: use the transaction: %w", err)
	}
	return c.listJobs(ctx, ex, f)
}

// listJobs is ListJobs on ex: the client's database, or a transaction.
func (c *Client) listJobs(ctx context.Context, ex driver.Executor, f JobFilter) (JobPage, error) {
	df, err := f.driverFilter()
	if err != nil {
		return JobPage{}, fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	limit := df.Max
	df.Max++ // one more tells whether a next page exists
	rows, err := ex.JobList(ctx, df)
	if err != nil {
		return JobPage{}, c.explainErr(ctx, err)
	}
	page := JobPage{Jobs: make([]*JobInfo, 0, min(len(rows), limit))}
	for i, r := range rows {
		if i == limit {
			page.Next = strconv.FormatInt(rows[i-1].ID, 10)
			break
		}
		info, err := jobInfoOf(r)
		if err != nil {
			return JobPage{}, err
		}
		page.Jobs = append(page.Jobs, info)
	}
	return page, nil
}

// driverFilter checks f, the same rule on every database, and returns
// it for the driver.
func (f *JobFilter) driverFilter() (driver.JobFilter, error) {
	df := driver.JobFilter{Kinds: f.Kinds, Queues: f.Queues, Key: f.Key, KeyPrefix: f.KeyPrefix, Tag: f.Tag,
		CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore,
		FinishedAfter: f.FinishedAfter, FinishedBefore: f.FinishedBefore, Max: cmp.Or(f.Limit, DefaultListLimit)}
	if f.Limit < 0 || f.Limit > MaxListLimit {
		return df, fmt.Errorf("limit %d is out of range: use 1 to %d jobs a page, or 0 for %d", f.Limit, MaxListLimit, DefaultListLimit)
	}
	if len(f.Kinds) > maxFilterItems || len(f.Queues) > maxFilterItems {
		return df, fmt.Errorf("the filter names %d kinds and %d queues: name at most %d of each", len(f.Kinds), len(f.Queues), maxFilterItems)
	}
	for _, k := range f.Kinds {
		if k == "" {
			return df, errors.New("a kind is empty: name job kinds as defined, e.g. \"billing.charge\"")
		}
	}
	for _, q := range f.Queues {
		if err := validateQueue(q); err != nil {
			return df, err
		}
	}
	for _, s := range f.States {
		st, err := ParseJobState(string(s))
		if err != nil {
			return df, err
		}
		df.States = append(df.States, driver.JobState(st))
	}
	if f.Key != "" && f.KeyPrefix != "" {
		return df, fmt.Errorf("both Key %s and KeyPrefix %s are set: set Key for one full key, or KeyPrefix for the keys starting with it", quoted(f.Key), quoted(f.KeyPrefix))
	}
	for _, k := range []string{f.Key, f.KeyPrefix} {
		if err := validateKey(k); err != nil {
			return df, err
		}
	}
	if _, err := encodeMetadata(f.Metadata); err != nil {
		return df, err
	}
	df.Metadata = f.Metadata
	if f.Tag != "" {
		if err := validateLabel("tag", f.Tag); err != nil {
			return df, err
		}
	}
	for _, r := range []struct {
		name          string
		after, before time.Time
	}{{"Created", f.CreatedAfter, f.CreatedBefore}, {"Finished", f.FinishedAfter, f.FinishedBefore}} {
		if !r.after.IsZero() && !r.before.IsZero() && !r.after.Before(r.before) {
			return df, fmt.Errorf("%sAfter %s is not before %sBefore %s: the range holds no job; swap them, or leave one unset",
				r.name, r.after.Format(time.RFC3339), r.name, r.before.Format(time.RFC3339))
		}
	}
	if f.After != "" {
		id, err := strconv.ParseInt(f.After, 10, 64)
		if err != nil || id <= 0 {
			return df, fmt.Errorf("cursor After %s is malformed: pass the Next of a page ListJobs returned, or \"\" for the first page", quoted(f.After))
		}
		df.BeforeID = id
	}
	return df, nil
}

// QueueStats counts one queue's jobs in each live state.
type QueueStats struct {
	Queue     string `json:"queue"`
	Ready     int    `json:"ready"`
	Running   int    `json:"running"`
	Scheduled int    `json:"scheduled"`
	Blocked   int    `json:"blocked"`
	Failed    int    `json:"failed"`
	// Waiting: jobs waiting for the jobs they depend on (DependsOn).
	Waiting int `json:"waiting"`
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
			Blocked: q.Blocked, Failed: q.Failed, Waiting: q.Waiting, Paused: paused[q.Queue]}
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
