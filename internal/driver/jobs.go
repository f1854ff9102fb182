package driver

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// NewJob is a job to insert together with the execution state admission
// chose for it. JobInsertMany sets ID.
type NewJob struct {
	ID          int64
	Kind        string
	Queue       string
	Args        []byte
	Priority    int
	MaxAttempts int
	Limit       Limit
	// More are the job's further concurrency keys (see MaxKeys), held
	// together with Limit's; nil for most jobs.
	More []Limit
	// Slots is how many slots of each of its keys the job takes (1 for
	// most jobs; see MaxSlots).
	Slots       int
	Rate        RateSpec
	ScheduledAt time.Time
	State       JobState // ready, scheduled or blocked: the table it is written to
	// Line is the key of the line a blocked job waits in: its
	// concurrency key when empty, else its rate key's (RateLine).
	Line string
	// UniqueKey is the job's unique key (UniqueStore), "" when it is not
	// unique; UniqueStates the states of an existing job of the key that
	// make this one a duplicate.
	UniqueKey    string
	UniqueStates []JobState
	// Metadata and Tags are JSON (an object of strings, an array of
	// strings) checked by bq before; nil when the job has none.
	Metadata, Tags []byte
	// Replace: the job takes the place of its key's queued jobs
	// (lifecycle.Replace cancels them before it is admitted); stored as
	// Block. CancelRunning: it also asks its key's running jobs to stop.
	// Debounce: a debounced job (ScheduledAt is its quiet period from
	// now): it joins its key's job of its kind still waiting to come due,
	// when there is one, rather than being stored (lifecycle.Replace).
	Replace, CancelRunning, Debounce bool
	// DebounceMaxWait bounds a debounced burst: the job it joins comes
	// due at most this long after that job's enqueue (0: no bound).
	// DebounceFirst: the joined job keeps its args (the burst's first).
	DebounceMaxWait time.Duration
	DebounceFirst   bool
	// DependsOn are the jobs it waits for (it is stored waiting until they
	// end); EvenIfFailed: it runs even if one of them fails for good or is
	// cancelled, rather than being cancelled with it.
	DependsOn    []int64
	EvenIfFailed bool
}

// DebounceParams moves a scheduled job's due time, a debounced enqueue
// joining it (ScheduledDebounce).
type DebounceParams struct {
	JobID int64
	// At is the job's new due time; Now the enqueue's instant: the job is
	// moved only if it is still not due at Now.
	At, Now time.Time
	// Args, unless nil, become the job's args.
	Args []byte
}

// LineList is the key of the line a blocked new job waits in.
func (j *NewJob) BlockedLine() string {
	if j.Line != "" {
		return j.Line
	}
	return j.Limit.Key
}

// Job is a job row as the engine reads it back.
type Job struct {
	ID          int64
	Kind        string
	Queue       string
	Args        []byte
	Priority    int
	Attempt     int // attempts that have ended (failed, lost)
	MaxAttempts int
	Limit       Limit
	More        []Limit // further concurrency keys; see NewJob.More
	Slots       int     // slots it takes of each of its keys; see NewJob.Slots
	Rate        RateSpec
	ScheduledAt time.Time
	CreatedAt   time.Time
	// Metadata and Tags are the JSON NewJob stored; nil when none.
	Metadata, Tags []byte
	// HasDependents: jobs wait for this one (DependsOn), as read; a
	// dependent enqueued later marks the row, which its finish sees.
	HasDependents bool
	// SlotHeld: a sequence's job (Limit.Sequence) that holds its key's
	// slot while scheduled (admitted when due without taking one again) or
	// failed (Limit.SequenceHalt: until retried or discarded).
	SlotHeld bool
}

// Execution is the row that puts an existing job into a state table.
type Execution struct {
	JobID    int64
	Queue    string
	Priority int
	Key      string    // blocked only
	At       time.Time // scheduled only
}

// JobState is where a job is: the states of bq.JobState, plus
// StatePending inside an admission. It names bq.JobState's values
// without a type of its own, so there is one JobState type, the root's.
type JobState = string

const (
	StateScheduled JobState = "scheduled"
	StateReady     JobState = "ready"
	StateBlocked   JobState = "blocked"
	StateRunning   JobState = "running"
	StateCompleted JobState = "completed"
	StateDiscarded JobState = "discarded"
	StateFailed    JobState = "failed"
	StateCancelled JobState = "cancelled"
	// StatePending is a new job stored before admission decides its
	// state, in the same transaction: JobInsertMany writes its job row only,
	// and admission its execution row (or deletes it, discarded).
	StatePending JobState = "pending"
)

// Executes reports whether s has an execution table a job can be written
// to: ready, scheduled or blocked.
func Executes(s JobState) bool {
	return s == StateReady || s == StateScheduled || s == StateBlocked
}

// CheckNewJobs refuses a job whose State has no execution table (and is
// not pending admission): it would be stored in none, and so never run.
func CheckNewJobs(jobs []*NewJob) error {
	for i, j := range jobs {
		if !Executes(j.State) && j.State != StatePending {
			return fmt.Errorf("insert jobs: job %d has state %q: a new job is ready, scheduled, blocked or pending", i, j.State)
		}
	}
	return nil
}

// JobInfo is a job with its state, for inspection.
type JobInfo struct {
	Job
	State      JobState
	LastError  string
	FinishedAt *time.Time
}

// JobStore writes jobs and the execution rows that give them a state.
type JobStore interface {
	// JobInsertMany inserts jobs and their execution rows, setting each ID.
	JobInsertMany(ctx context.Context, now time.Time, jobs []*NewJob) error
	// ExecutionInsertMany puts existing jobs into state's table.
	ExecutionInsertMany(ctx context.Context, state JobState, rows []Execution) error
	// JobFinish records the job's end: attempt+1, finished_at, and
	// discarded when admission dropped it.
	JobFinish(ctx context.Context, jobID int64, now time.Time, discarded bool) error
	// JobDeleteMany removes jobs outright (retention 0).
	JobDeleteMany(ctx context.Context, ids []int64) error
	// JobFailAttempt ends an attempt that failed: attempt+1 and last_error.
	JobFailAttempt(ctx context.Context, jobID int64, msg string) error
	// FailedInsert moves a job to the failed table.
	FailedInsert(ctx context.Context, jobID int64, msg string, now time.Time) error
	// JobGet returns a job and its state; ok is false when it does not exist.
	JobGet(ctx context.Context, id int64) (info *JobInfo, ok bool, err error)
	// ScheduledTakeDue removes up to max scheduled executions due at now
	// and returns their jobs.
	ScheduledTakeDue(ctx context.Context, now time.Time, max int) ([]*Job, error)
	// ScheduledDebounce moves job p.JobID, scheduled and not yet due at
	// p.Now, to come due at p.At, and gives it p.Args unless nil. It
	// reports false, changing nothing, when the job is not waiting any
	// more (due, taken by the dispatcher, or gone).
	ScheduledDebounce(ctx context.Context, p DebounceParams) (bool, error)
	// JobHoldSlot marks a sequence's job (Limit.Sequence) as holding its
	// key's slot while it is scheduled (a retry, a snooze) or failed
	// (SequenceHalt), or, held false, no longer: it is counted as a holder
	// of its key (HolderCount, HolderList) while held and scheduled or
	// failed. A job that is not a sequence's is left unchanged.
	JobHoldSlot(ctx context.Context, jobID int64, held bool) error
	// FailedDelete removes job id's failed execution, as it is retried or
	// discarded by hand. It reports false when the job is not failed.
	FailedDelete(ctx context.Context, jobID int64) (bool, error)
	// ExecutionDelete removes job id's row from state's table (ready,
	// scheduled, blocked or failed), as the job is cancelled. It reports
	// false when the job is not in that state (it moved meanwhile).
	ExecutionDelete(ctx context.Context, state JobState, jobID int64) (bool, error)
	// JobCancel finishes a job as cancelled: finished_at and cancelled,
	// attempt+1 when ran (a run ended), and msg as last_error unless empty.
	JobCancel(ctx context.Context, p JobCancelParams) error
}

// JobCancelParams finishes a job as cancelled (JobCancel).
type JobCancelParams struct {
	JobID int64
	Now   time.Time
	Ran   bool
	Msg   string
}

// LogKey is a job's key as a log attribute: key=..., or nothing at all
// for an unkeyed job (slog drops an empty Attr).
func LogKey(key string) slog.Attr {
	if key == "" {
		return slog.Attr{}
	}
	return slog.String("key", key)
}
