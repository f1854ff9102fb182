package driver

import (
	"context"
	"time"
)

// StateWaiting is a job waiting for other jobs (its dependencies) to
// finish: it holds no slot, rate start or place in a line until its last
// dependency completes, and is then admitted like a new job.
const StateWaiting JobState = "waiting"

// Dependency is an edge: job JobID waits for job DependsOn. EvenIfFailed:
// a DependsOn that fails for good or is cancelled counts as done rather
// than cancelling JobID.
type Dependency struct {
	JobID, DependsOn int64
	EvenIfFailed     bool
}

// DependencyEnd is how a dependency ended, as its dependent sees it.
type DependencyEnd int

const (
	// DependencyOpen: not finished yet (waiting, scheduled, ready,
	// blocked or running).
	DependencyOpen DependencyEnd = iota
	// DependencyCompleted: it ran to completion.
	DependencyCompleted
	// DependencyFailed: it failed for good, or was cancelled or discarded.
	DependencyFailed
)

// Waiting is a waiting job's row: Pending of its Total dependencies are
// still to end.
type Waiting struct {
	JobID          int64
	Queue          string
	Priority       int
	Pending, Total int
	At             time.Time
}

// DependencyStore keeps the dependencies between jobs and the jobs
// waiting for theirs. Every method runs in the caller's transaction.
type DependencyStore interface {
	// DependencyMark marks job id as having dependents, locking its row,
	// and reports how it ended so far; ok is false when it does not
	// exist. A finish of the job that commits after the mark sees it (it
	// writes the same row) and takes the job's edges.
	DependencyMark(ctx context.Context, id int64) (end DependencyEnd, ok bool, err error)
	// DependencyInsertMany stores edges.
	DependencyInsertMany(ctx context.Context, deps []Dependency) error
	// DependentsTake deletes and returns the edges from job id to the
	// jobs waiting for it, in job order; the first taker gets them.
	DependentsTake(ctx context.Context, id int64) ([]Dependency, error)
	// WaitingInsert stores a waiting job's row.
	WaitingInsert(ctx context.Context, w Waiting) error
	// WaitingCountDown subtracts n from job id's pending count and
	// returns what is left; ok is false when the job is not waiting.
	WaitingCountDown(ctx context.Context, id int64, n int) (left int, ok bool, err error)
	// WaitingGet reads job id's waiting row and the dependencies it still
	// waits for, in id order.
	WaitingGet(ctx context.Context, id int64) (w Waiting, open []int64, ok bool, err error)
	// DependencyListEnded lists up to max jobs that ended (finished,
	// failed, or gone) and still have edges: the dispatcher takes them
	// (a finish whose edges were left to a second transaction that never
	// ran).
	DependencyListEnded(ctx context.Context, max int) ([]int64, error)
	// DependencyCancelRecord records that job id was cancelled as job by,
	// which it waited for, failed; DependencyCancelTake deletes and
	// returns the jobs by's failure cancelled (the first taker gets them).
	DependencyCancelRecord(ctx context.Context, by, id int64) error
	DependencyCancelTake(ctx context.Context, by int64) ([]int64, error)
	// JobRearm takes cancelled job id back to unfinished (no state row:
	// the caller writes its waiting row), its error cleared; false when it
	// is not cancelled any more. DependencyCountOpen counts the edges to
	// job id still standing.
	JobRearm(ctx context.Context, id int64) (bool, error)
	DependencyCountOpen(ctx context.Context, id int64) (int, error)
	// JobSetOutput stores job id's output, only while its claim of fence
	// fence holds; false when it does not (the run was fenced out).
	JobSetOutput(ctx context.Context, id, fence int64, output []byte) (bool, error)
	// JobGetOutput reads job id's output (nil when it stored none); ok
	// is false when the job does not exist.
	JobGetOutput(ctx context.Context, id int64) (output []byte, ok bool, err error)
	// JobFindTask returns the id of task task of workflow workflow
	// (metadata bq.workflow and bq.task); ok is false when none.
	JobFindTask(ctx context.Context, workflow, task string) (id int64, ok bool, err error)
}
