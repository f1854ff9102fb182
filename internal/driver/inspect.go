package driver

import (
	"context"
	"strings"
	"time"
)

// GroupOf returns a full key's limit group: the part before the first
// "/" (full key = Group + "/" + Key). Metrics and status reports use it
// in place of the key, whose values may be unbounded or private.
func GroupOf(key string) string {
	group, _, _ := strings.Cut(key, "/")
	return group
}

// QueueAge is when the oldest ready job of a queue became ready.
type QueueAge struct {
	Queue       string
	OldestReady time.Time
}

// GroupStats sums the semaphores of one limit group.
type GroupStats struct {
	Group string
	// Keys counts the group's semaphores.
	Keys int
	// MinLimit and MaxLimit bound its keys' limits (they differ when
	// enqueues pass their own limits).
	MinLimit, MaxLimit int
	// Active counts holders (ready and claimed jobs) over its keys.
	Active int
	// Blocked counts jobs waiting for a slot of one of its keys.
	Blocked int
	// Saturated counts keys with no free slot.
	Saturated int
}

// Holder is a ready or claimed job holding a slot of a key.
type Holder struct {
	JobID   int64
	Kind    string
	Queue   string
	Running bool // claimed by a worker; otherwise ready, waiting for one
	// Held: a sequence's job holding its slot while scheduled for its
	// retry (or snooze) or failed (Limit.SequenceHalt); neither ready nor
	// running.
	Held bool
	// The claim's process; zero unless Running. ProcessBeat is zero when
	// the process row is gone.
	ProcessID   int64
	ProcessName string
	ProcessBeat time.Time
	ClaimedAt   time.Time
}

// BlockedJob is one job in a key's blocked line.
type BlockedJob struct {
	JobID    int64
	Kind     string
	Queue    string
	Priority int
	Since    time.Time
}

// ExecutionDetail is what a job's execution row says. Each time is zero
// unless the job is in that table.
type ExecutionDetail struct {
	ReadySince   time.Time
	BlockedSince time.Time
	DueAt        time.Time // scheduled: when it is due
	ClaimedAt    time.Time
	FailedAt     time.Time
	// The claim's process, as for Holder.
	ProcessID   int64
	ProcessName string
	ProcessBeat time.Time
	// CancelRequestedAt: when a cancel marked the claim; zero when none.
	CancelRequestedAt time.Time
	// Fence is the claim's fence (its run's JobMeta.Token); zero when
	// the job is not claimed.
	Fence int64
}

// FailedJob is a job in the failed table.
type FailedJob struct {
	JobID    int64
	Kind     string
	Queue    string
	Key      string
	Attempt  int
	Error    string
	FailedAt time.Time
}

// QueueCounts is the number of jobs of one queue in each state.
type QueueCounts struct {
	Queue     string `json:"queue"`
	Ready     int    `json:"ready"`
	Running   int    `json:"running"`
	Scheduled int    `json:"scheduled"`
	Blocked   int    `json:"blocked"`
	Failed    int    `json:"failed"`
	Waiting   int    `json:"waiting"`
}

// Inspector reads, for Health, Explain, the CLI and the dashboard:
// read-only, one statement each, bounded by max where the answer could
// grow with the data (see inspect.go).
type Inspector interface {
	// JobCountByQueue returns per-queue counts of every live state.
	JobCountByQueue(ctx context.Context) ([]QueueCounts, error)
	// SchemaVersion returns the newest applied migration version, 0 when
	// bq's tables were never created.
	SchemaVersion(ctx context.Context) (int64, error)
	// ClockNow reads the database server's clock; the zero time for a
	// database with no clock of its own (SQLite, whose clock is its
	// host's).
	ClockNow(ctx context.Context) (time.Time, error)

	// ReadyListAges returns, per queue with ready jobs, when its oldest ready
	// job became ready.
	ReadyListAges(ctx context.Context) ([]QueueAge, error)
	// GroupListStats sums the semaphores of each limit group (the part of a
	// key before its first "/"), up to max groups in group order.
	GroupListStats(ctx context.Context, max int) ([]GroupStats, error)
	// SemaphoreListMostBlocked returns up to max semaphores with blocked jobs, most
	// blocked first, then by key.
	SemaphoreListMostBlocked(ctx context.Context, max int) ([]Semaphore, error)
	// SemaphoreGet reads key's semaphore without locking it.
	SemaphoreGet(ctx context.Context, key string) (s Semaphore, ok bool, err error)
	// HolderList returns up to max holders of key (its ready and claimed
	// jobs, a multi-key job among them for each of its keys) in job id
	// order.
	HolderList(ctx context.Context, key string, max int) ([]Holder, error)
	// LineCountAhead counts the blocked jobs of key that would be promoted
	// before a blocked job of that priority and id, reading at most max
	// of them: a long line costs no more than max rows.
	LineCountAhead(ctx context.Context, p LineAheadParams) (int, error)
	// LineList returns the first max blocked jobs of key, in promotion
	// order (priority descending, then id).
	LineList(ctx context.Context, key string, max int) ([]BlockedJob, error)
	// JobListStranded lists, by id after `after`, up to max unfinished
	// jobs whose state rows (ready, blocked, scheduled, claimed, failed)
	// are not exactly one: none (nothing will ever run the job) or
	// several.
	JobListStranded(ctx context.Context, after int64, max int) ([]StrandedJob, error)
	// ExecutionGet reads the execution row of job id, whatever table
	// holds it; ok is false when the job does not exist.
	ExecutionGet(ctx context.Context, id int64) (x ExecutionDetail, ok bool, err error)
	// FailedList returns up to max failed jobs with an id below before
	// (0: from the newest), newest first.
	FailedList(ctx context.Context, before int64, max int) ([]FailedJob, error)
	// JobList returns up to f.Max jobs matching every field of f that
	// is set, newest (highest id) first.
	JobList(ctx context.Context, f JobFilter) ([]*JobInfo, error)
}

// JobFilter selects jobs for ListJobs; a zero field matches every job.
// bq checks it before (one of Key and KeyPrefix, labels by bq's rule).
type JobFilter struct {
	Kinds, Queues []string          // any of
	States        []JobState        // any of
	Key           string            // the full key, exactly
	KeyPrefix     string            // full keys starting with it, byte for byte
	Metadata      map[string]string // every pair
	Tag           string
	// Times: After is at or after, Before strictly before.
	CreatedAfter, CreatedBefore   time.Time
	FinishedAfter, FinishedBefore time.Time
	BeforeID                      int64 // ids below it only; 0: from the newest
	Max                           int
}

// LineAheadParams asks how many jobs stand before job JobID of priority
// Priority in Key's line, counting up to Max (LineCountAhead).
type LineAheadParams struct {
	Key      string
	Priority int
	JobID    int64
	Max      int
}

// StrandedJob is an unfinished job whose state rows are not one
// (JobListStranded).
type StrandedJob struct {
	ID        int64
	StateRows int
}
