package driver

import (
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
