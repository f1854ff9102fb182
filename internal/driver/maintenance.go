package driver

import (
	"context"
	"time"
)

// Maintenance is what the dispatcher's passes run: due scheduled jobs,
// expired and promotable semaphores, lost claims, old rows.
type Maintenance interface {
	// PassLook reports, in one read, which of a dispatcher pass's steps
	// have work at now.
	PassLook(ctx context.Context, now time.Time) (PassWork, error)
	// ScheduledDueExists reports whether a scheduled job is due at now.
	ScheduledDueExists(ctx context.Context, now time.Time) (bool, error)
	// SemaphoreListExpired lists keys after `after` whose semaphore expired.
	SemaphoreListExpired(ctx context.Context, now time.Time, after string, max int) ([]string, error)
	// SemaphoreList lists every key after `after` that has a semaphore, in
	// the database's order of keys (bq verify's walk).
	SemaphoreList(ctx context.Context, after string, max int) ([]string, error)
	// SemaphoreListPromotable lists keys after `after` with a free slot and a
	// blocked job.
	SemaphoreListPromotable(ctx context.Context, after string, max int) ([]string, error)
	// SemaphoreDeleteIdle removes expired semaphores with every slot free
	// and nothing blocked, except those a blocked multi-key job names
	// among its keys (job_keys): its promotion must find them.
	SemaphoreDeleteIdle(ctx context.Context, now time.Time, max int) (int, error)
	// ClaimListReapable lists claims whose process is gone, or is dead: silent
	// at now for longer than deadAfter and its own DeadAfter, while the
	// database was shown writable (see the package doc). It locks them, skipping
	// rows others hold.
	ClaimListReapable(ctx context.Context, now time.Time, deadAfter time.Duration, max int) ([]*Claim, error)
	// ClaimListReapableOfKey lists, locked, the claims of key (a multi-key job's
	// for each of its keys) whose process is
	// gone or dead (see the package doc) for the silence of the key: the longest of
	// silence, the claimed job's own Duration and three of its process's
	// heartbeat intervals.
	ClaimListReapableOfKey(ctx context.Context, key string, now time.Time, silence time.Duration) ([]*Claim, error)
	// JobDeleteFinished removes up to max jobs finished before `before`.
	JobDeleteFinished(ctx context.Context, before time.Time, max int) (int, error)
}

// PassWork is what a dispatcher pass finds to do (PassLook): each field
// says whether the rows its step reads exist, so a pass in a process of a
// fleet that finds nothing sends one read, not one a step.
type PassWork struct {
	// ScheduledDue: a scheduled job is due (ScheduledDueExists).
	ScheduledDue bool
	// SemaphoresExpired: a semaphore expired with a slot taken or a job
	// blocked (SemaphoreListExpired).
	SemaphoresExpired bool
	// SemaphoresPromotable: a semaphore has a free slot and a blocked
	// job (SemaphoreListPromotable).
	SemaphoresPromotable bool
	// DependenciesEnded: a job that ended still has dependents' edges
	// (DependencyListEnded).
	DependenciesEnded bool
	// Beats: every registered process's id and last heartbeat, in id
	// order, as ProcessList reads them: the reaper's look (which claims
	// may be lost) in the same read.
	Beats []ProcessBeat
}

// ProcessBeat is a process's id and last heartbeat (PassWork.Beats).
type ProcessBeat struct {
	ID              int64
	LastHeartbeatAt time.Time
}
