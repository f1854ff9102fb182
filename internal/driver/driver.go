// Package driver is the contract between bq's engine and a database.
//
// A driver implements every statement bq runs, in its own dialect; the
// engine (semaphore admission, job lifecycle, dispatcher) decides which
// statements run, in which order, inside which transaction. State is which
// table holds a job: ready, scheduled, blocked, claimed or failed; a job in
// none of them is finished.
//
// Dead processes. A process is dead when its row is gone, or on evidence:
// it has been silent (no heartbeat recorded) for longer than both the
// dispatcher's ProcessDeadAfter and its own DeadAfter, and the database
// was writable over that silence: another process's heartbeats landed
// without a gap for at least as long, within it (from the later of the
// silent process's last beat and the other's BeatingSince, to the other's
// last beat). A silence every process shared (an outage, a database
// locked by a frozen writer) is no evidence, so no live process is
// declared dead for it.
package driver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Dialect names a database family.
type Dialect string

const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
	MySQL    Dialect = "mysql"
)

// Driver opens transactions on one database.
type Driver interface {
	Dialect() Dialect
	// Prefix is the table-name prefix every statement uses.
	Prefix() string
	// WithPrefix returns the driver on the same connections, naming
	// tables with prefix. The prefix must already be validated.
	WithPrefix(prefix string) Driver
	// Exec runs statements outside any transaction, each on its own.
	Exec() Executor
	// Begin starts a write transaction owned by bq: READ COMMITTED on
	// PostgreSQL and MySQL, BEGIN IMMEDIATE on SQLite.
	Begin(ctx context.Context) (Tx, error)
	// Claim takes up to p.Max ready jobs of p.Queue for p.ProcessID within
	// the queue's gate (paused: none; MaxActive: a cap on its running
	// jobs), the driver's best way: ClaimWithin with its ClaimWays.
	Claim(ctx context.Context, p ClaimParams) ([]*Claim, error)
	// WrapTx adapts the caller's transaction (pgx.Tx, *sql.Tx) so bq can
	// write inside it.
	WrapTx(tx any) (Executor, error)
	// Retryable reports whether err is a transient conflict (deadlock,
	// serialization failure, busy database) worth running the
	// transaction again for.
	Retryable(err error) bool
	// SQLDB returns a database/sql handle for migrations.
	SQLDB() *sql.DB
	// MigrationLock serialises bq's migrations of this prefix across
	// processes until unlock is called: several processes may migrate at
	// once on start-up, and the others must wait for the first rather
	// than fail half-way. The lock is the database's own (PostgreSQL's
	// advisory lock, MySQL's GET_LOCK, a file lock beside a SQLite file),
	// held by a session or file that ends with the process, so a
	// migrator that dies releases it. It waits at most MigrationLockWait.
	MigrationLock(ctx context.Context) (unlock func(), err error)
	// Close releases what the driver opened itself; a wrapped pool or
	// *sql.DB belongs to the caller and stays open.
	Close() error
}

// Tx is a transaction bq owns.
type Tx interface {
	Executor
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// OnConflict says what admission does with a job whose key has no slot.
type OnConflict int

const (
	Block OnConflict = iota
	Discard
)

// Limit is the concurrency spec a keyed job carries in its row, so the
// dispatcher can admit it without the job's code.
type Limit struct {
	Key string // full key, Group + "/" + Key(args); "" means unkeyed
	// To is the job's own limit; 0 leaves it to its queue's policy
	// (MaxActivePerKey), else 1. A key override (SetKeyLimit) beats both.
	To         int
	Duration   time.Duration
	OnConflict OnConflict
	// MaxBlocked caps the key's backlog; 0 leaves it to the queue's
	// policy, else unbounded.
	MaxBlocked int
}

// NewJob is a job to insert together with the execution state admission
// chose for it. InsertJobs sets ID.
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
	More        []Limit
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
}

// BlockedLine is the key of the line a blocked new job waits in.
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
	Rate        RateSpec
	ScheduledAt time.Time
	CreatedAt   time.Time
	// Metadata and Tags are the JSON NewJob stored; nil when none.
	Metadata, Tags []byte
}

// Claim is a job taken by a worker; Fence identifies this claim alone, so a
// completion from an earlier claim of the same job matches nothing.
type Claim struct {
	Job
	Fence     int64
	ClaimedAt time.Time
	// StartBy: a run of a rated job must begin by then, or not at all
	// (lifecycle.StartRated); zero when unbounded. RateSlot is the slot
	// of its key's ring its start was stamped on.
	StartBy  time.Time
	RateSlot int
}

// Promotion is what moving blocked jobs to ready did: how many moved, and
// the queues they are in, each once: whose workers, in every process,
// must be woken.
type Promotion struct {
	Jobs   int
	Queues []string
	// JobIDs are the jobs moved, in promotion order; only PromoteBlocked
	// fills it in.
	JobIDs []int64
	// LineLeft (ReleaseMany only): the key's line holds multi-key jobs
	// (its Multi > 0), so its slots were given back but its line left for
	// the caller to promote (package semaphore).
	LineLeft bool
}

// Add counts o in p.
func (p *Promotion) Add(o Promotion) {
	p.Jobs += o.Jobs
	p.JobIDs = append(p.JobIDs, o.JobIDs...)
	for _, q := range o.Queues {
		p.AddQueue(q)
	}
}

// AddQueue names one more queue that got ready jobs.
func (p *Promotion) AddQueue(q string) {
	if !slices.Contains(p.Queues, q) {
		p.Queues = append(p.Queues, q)
	}
}

// Fenced names one claim: a job and the fence of that claim of it.
type Fenced struct {
	JobID, Fence int64
}

// Execution is the row that puts an existing job into a state table.
type Execution struct {
	JobID    int64
	Queue    string
	Priority int
	Key      string    // blocked only
	At       time.Time // scheduled only
}

// Semaphore is a key's slot count. Value is the number of free slots:
// Limit minus the holders (ready and claimed jobs of the key). Blocked is
// how many jobs of the key wait in the blocked table.
type Semaphore struct {
	Key     string
	Value   int
	Limit   int
	Blocked int
	// Multi counts the multi-key jobs among Blocked (see MultiKeyStore):
	// while above 0, the line is promoted by package semaphore, head by
	// head, never by a driver's set-wise promotion.
	Multi     int
	Duration  time.Duration
	ExpiresAt time.Time

	// Read by SemaphoreLock, never saved:
	Override int    // the key's SetKeyLimit override; 0 when none
	Policy   Policy // the policy of the queue named to SemaphoreLock
}

// RenewAfter is the share of a key's Duration left on its semaphore's
// failsafe (ExpiresAt) below which a slot taken or passed on renews it
// to a full Duration: package semaphore and the drivers' set-wise
// releases follow this one rule, so a busy key's expiry changes once per
// half Duration rather than with every job.
const RenewAfter = 0.5

// Renews reports whether a semaphore whose failsafe is at expires renews
// it at now, its Duration d: less than RenewAfter of d is left.
func Renews(expires, now time.Time, d time.Duration) bool {
	return expires.Before(now.Add(time.Duration(float64(d) * RenewAfter)))
}

// Policy is a queue's stored operations policy; zero fields mean none.
type Policy struct {
	Queue           string
	Namespace       string
	MaxActive       int
	MaxActivePerKey int
	MaxBlocked      int
	// MaxStartsPerKey starts per StartsPeriod is the rate of the queue's
	// rated jobs whose own Rate sets no Limit; 0 for none.
	MaxStartsPerKey int
	StartsPeriod    time.Duration
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// Gate is what decides whether and how much a claim of a queue may take:
// a paused queue claims nothing; a MaxActive above 0 caps its claimed jobs.
type Gate struct {
	MaxActive int
	Paused    bool
}

// PausedQueue is a queue PauseQueue stopped: it claims nothing until resumed.
type PausedQueue struct {
	Queue    string
	PausedAt time.Time
}

// ClaimParams asks for up to Max ready jobs of Queue.
type ClaimParams struct {
	Queue     string
	Max       int
	ProcessID int64
	Now       time.Time
}

// Process is a registered worker or dispatcher.
type Process struct {
	ID                int64
	Kind              string // "worker", "dispatcher", "worker+dispatcher"
	Name              string
	Hostname          string
	PID               int
	Queues            string
	HeartbeatInterval time.Duration
	// DeadAfter is the silence after which the process expects to be
	// declared dead: it stops its own runs before then. A dispatcher
	// waits for the longer of this and its own ProcessDeadAfter.
	DeadAfter       time.Duration
	StartedAt       time.Time
	LastHeartbeatAt time.Time
	// BeatingSince is when the process's current run of heartbeats, none
	// missed, began: while it beats, the database is writable, so another
	// process's silence over that time is its own.
	BeatingSince time.Time
}

// Beat is one heartbeat of a process.
type Beat struct {
	ProcessID int64
	// At is when the beat was sent; it is what the row records, so a beat
	// that lands late never claims more life than the process had.
	At           time.Time
	BeatingSince time.Time
}

// OwnClaim is a claim as its process sees it, to check that it still
// holds it.
type OwnClaim struct {
	JobID, Fence int64
	ClaimedAt    time.Time
	// CancelRequested: a cancel marked the claim (MarkCancel); its run
	// is to be cancelled.
	CancelRequested bool
}

// JobState is where a job is, read from which table holds it.
type JobState string

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
	// state, in the same transaction: InsertJobs writes its job row only,
	// and admission its execution row (or deletes it, discarded).
	StatePending JobState = "pending"
)

// Executes reports whether s has an execution table a job can be written
// to: ready, scheduled or blocked.
func (s JobState) Executes() bool {
	return s == StateReady || s == StateScheduled || s == StateBlocked
}

// CheckNewJobs refuses a job whose State has no execution table (and is
// not pending admission): it would be stored in none, and so never run.
func CheckNewJobs(jobs []*NewJob) error {
	for i, j := range jobs {
		if !j.State.Executes() && j.State != StatePending {
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

// QueueCounts is the number of jobs of one queue in each state.
type QueueCounts struct {
	Queue     string `json:"queue"`
	Ready     int    `json:"ready"`
	Running   int    `json:"running"`
	Scheduled int    `json:"scheduled"`
	Blocked   int    `json:"blocked"`
	Failed    int    `json:"failed"`
}

// Executor runs bq's statements, inside or outside a transaction. It is
// the union of the roles below; the engine's packages each take only the
// roles they use, so they can be tested against a fake.
type Executor interface {
	JobStore
	UniqueStore
	ClaimStore
	SemaphoreStore
	RateStore
	Maintenance
	PolicyStore
	PauseStore
	PeriodicStore
	ProcessStore
	Inspector
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
	// FailedDelete removes job id's failed execution, as it is retried or
	// discarded by hand. It reports false when the job is not failed.
	FailedDelete(ctx context.Context, jobID int64) (bool, error)
	// ExecutionDelete removes job id's row from state's table (ready,
	// scheduled, blocked or failed), as the job is cancelled. It reports
	// false when the job is not in that state (it moved meanwhile).
	ExecutionDelete(ctx context.Context, state JobState, jobID int64) (bool, error)
	// JobCancel finishes a job as cancelled: finished_at and cancelled,
	// attempt+1 when ran (a run ended), and msg as last_error unless empty.
	JobCancel(ctx context.Context, jobID int64, now time.Time, ran bool, msg string) error
}

// ClaimStore takes ready jobs for a worker and ends claims by their fence.
type ClaimStore interface {
	// ReadyExists reports whether queue has ready jobs: a claimer looks
	// before it takes any lock, since most idle polls find nothing.
	ReadyExists(ctx context.Context, queue string) (bool, error)
	// QueueGateGet reads what the claim rule needs of queue: its MaxActive
	// (0 when it has none) and whether it is paused. Inside a transaction
	// it locks the queue's policy row until the transaction ends, so
	// claimers of a capped queue take turns and each counts the claims of
	// those before it; outside one it only reads.
	QueueGateGet(ctx context.Context, queue string) (Gate, error)
	// RunningCount counts the claimed jobs of queue.
	RunningCount(ctx context.Context, queue string) (int, error)
	// ReadyClaim moves up to p.Max ready jobs of p.Queue to claimed, in
	// priority then FIFO order, skipping rows other claimers hold. It
	// knows no cap: the engine's claim rule (lifecycle.Claim) decides
	// p.Max. It may run several statements: run it in a transaction.
	ReadyClaim(ctx context.Context, p ClaimParams) ([]*Claim, error)
	// ClaimDelete removes the claim matching both jobID and fence. It
	// reports false when the claim no longer exists (a stale fence).
	ClaimDelete(ctx context.Context, jobID, fence int64) (bool, error)
	// ClaimMarkCancel marks job id's claim as asked to cancel at now, keeping
	// an earlier mark, and returns the mark. ok is false when the job has
	// no claim (it is not running). It may run several statements: run
	// it in a transaction.
	ClaimMarkCancel(ctx context.Context, jobID int64, now time.Time) (requestedAt time.Time, ok bool, err error)
	// ClaimCancelRequested locks the claim matching jobID and fence until the
	// transaction ends and reports whether it carries a cancel mark; false
	// when the claim no longer exists. A run's end reads it before ending
	// the claim, so a cancel marked before that end is never lost, and
	// one marked after finds no claim.
	ClaimCancelRequested(ctx context.Context, jobID, fence int64) (bool, error)
	// ClaimCompleteMany ends many successful runs at once: each claim whose
	// fence still matches is deleted and its job finished (attempt+1,
	// finished_at) or, with keep false, deleted. It returns the claims
	// that matched.
	ClaimCompleteMany(ctx context.Context, claims []*Claim, keep bool, now time.Time) ([]Fenced, error)
}

// SemaphoreStore keeps each key's slot count; see package semaphore.
type SemaphoreStore interface {
	// SemaphoreEnsure creates key's semaphore with every slot free (limit
	// max(l.To, 1)) unless it exists; it never fails on a concurrent create.
	SemaphoreEnsure(ctx context.Context, l Limit, now time.Time) error
	// SemaphoreLock reads key's semaphore, its override and the policy of
	// queue ("" for none), and locks the semaphore until the transaction
	// ends. ok is false when it does not exist.
	SemaphoreLock(ctx context.Context, key, queue string) (s Semaphore, ok bool, err error)
	// SemaphoreTryLock locks key's semaphore until the transaction ends
	// unless another transaction holds it: maintenance skips a key
	// someone is admitting or releasing (they promote it themselves) and
	// never waits behind a holder that froze. false: missing or held.
	SemaphoreTryLock(ctx context.Context, key string) (bool, error)
	// SemaphoreSave writes Value, Limit, Blocked, Multi, Duration and ExpiresAt.
	SemaphoreSave(ctx context.Context, s Semaphore) error
	// LinePromote moves up to n blocked jobs of key to ready, highest
	// priority first, FIFO among equals, and returns what moved, with the
	// moved jobs' ids in that order.
	// Callers hold the key's semaphore lock.
	LinePromote(ctx context.Context, key string, n int, now time.Time) (Promotion, error)
	// HolderCount counts what the key's rows say its semaphore holds.
	HolderCount(ctx context.Context, key string) (HolderCount, error)
	MultiKeyStore
	MultiBatcher
}

// Maintenance is what the dispatcher's passes run: due scheduled jobs,
// expired and promotable semaphores, lost claims, old rows.
type Maintenance interface {
	// ScheduledDueExists reports whether a scheduled job is due at now.
	ScheduledDueExists(ctx context.Context, now time.Time) (bool, error)
	// SemaphoreListExpired lists keys after `after` whose semaphore expired.
	SemaphoreListExpired(ctx context.Context, now time.Time, after string, max int) ([]string, error)
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

// PolicyStore keeps queue policies and key overrides.
type PolicyStore interface {
	// PolicyLockMany returns, locked and ordered by queue, the policies of
	// namespace and of the named queues.
	PolicyLockMany(ctx context.Context, namespace string, queues []string) ([]Policy, error)
	// PolicyInsert stores a new policy; false when its queue already has one.
	PolicyInsert(ctx context.Context, p Policy) (bool, error)
	// PolicyUpdate rewrites a policy's limits and UpdatedAt.
	PolicyUpdate(ctx context.Context, p Policy) error
	// PolicyDelete removes a queue's policy.
	PolicyDelete(ctx context.Context, queue string) error
	// PolicyList returns every policy, ordered by queue.
	PolicyList(ctx context.Context) ([]Policy, error)
	// PolicyListKeys lists, in key order, the keys of the queue's unfinished
	// jobs that leave their limit to the queue's policy (To 0).
	PolicyListKeys(ctx context.Context, queue string) ([]string, error)
	// PolicyListRateKeys lists, in key order, the rate keys of the queue's
	// unfinished jobs that leave their rate to the queue's policy (no
	// rate limit of their own).
	PolicyListRateKeys(ctx context.Context, queue string) ([]string, error)
	// KeyLimitSet stores (or replaces) key's override.
	KeyLimitSet(ctx context.Context, key string, limit int, now time.Time) error
	// KeyLimitDelete removes key's override; false when it had none.
	KeyLimitDelete(ctx context.Context, key string) (bool, error)
	// JobLimitGetLatest returns the limit and queue of key's newest unfinished
	// job; ok is false when it has none.
	JobLimitGetLatest(ctx context.Context, key string) (l Limit, queue string, ok bool, err error)
}

// PauseStore keeps the paused queues, which claim nothing in any process
// (lifecycle.Claim reads them through QueueGate).
type PauseStore interface {
	// QueuePause marks queue paused at now; false when it already was
	// (its first paused_at is kept).
	QueuePause(ctx context.Context, queue string, now time.Time) (bool, error)
	// QueueResume removes queue's pause; false when it was not paused.
	QueueResume(ctx context.Context, queue string) (bool, error)
	// QueueListPaused returns the paused queues, ordered by queue.
	QueueListPaused(ctx context.Context) ([]PausedQueue, error)
}

// ProcessStore keeps the process rows heartbeats prove alive.
type ProcessStore interface {
	// ProcessRegister inserts p and returns its ID.
	ProcessRegister(ctx context.Context, p Process) (int64, error)
	// ProcessHeartbeat records the beat in the process row, in a statement of
	// its own that waits on no lock but the row's. It reports false with
	// a nil err when the row is gone (the process was declared dead).
	ProcessHeartbeat(ctx context.Context, b Beat) (landed bool, err error)
	// SemaphoreRenewHeld renews the semaphores that processID's claims hold and
	// whose expiry is less than renewBelow (a fraction) of their Duration
	// after at: each then expires Duration after at. It skips rows others
	// hold (a skipped key is renewed next beat) and locks keys in order,
	// so two renewals never deadlock. It may run several statements: run
	// it in a transaction.
	SemaphoreRenewHeld(ctx context.Context, processID int64, at time.Time, renewBelow float64) error
	// ClaimListOfProcess lists the process's claims.
	ClaimListOfProcess(ctx context.Context, processID int64) ([]OwnClaim, error)
	// ProcessDeregister removes the process row.
	ProcessDeregister(ctx context.Context, processID int64) error
	// ProcessDeleteDead removes dead processes (see LostClaims) that
	// hold no claims.
	ProcessDeleteDead(ctx context.Context, now time.Time, deadAfter time.Duration) (int, error)
	// ProcessList returns the registered processes.
	ProcessList(ctx context.Context) ([]Process, error)
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
	LineCountAhead(ctx context.Context, key string, priority int, jobID int64, max int) (int, error)
	// LineList returns the first max blocked jobs of key, in promotion
	// order (priority descending, then id).
	LineList(ctx context.Context, key string, max int) ([]BlockedJob, error)
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

// BatchReleaser is an executor that releases the slots of many keys in a
// fixed number of statements, however many keys there are. Without it,
// keys are released one by one.
type BatchReleaser interface {
	// SemaphoreReleaseMany gives back counts[i] slots of keys[i] (sorted, distinct),
	// each capped at its limit, then promotes blocked jobs into the free
	// slots, highest priority first, FIFO among equals. It returns what
	// each key promoted. A key whose Multi is above 0 gets its slots back
	// but its line is left alone, its Promotion's LineLeft set.
	SemaphoreReleaseMany(ctx context.Context, keys []string, counts []int, now time.Time) ([]Promotion, error)
}

// OneKeyReleaser is a BatchReleaser whose ReleaseMany is the cheaper
// release of a single key as well (PostgreSQL: the lock and the release
// go out in one round trip and write the semaphore once, where the
// per-key path locks, promotes and saves in three statements). Without
// it, a single key is released by the per-key path.
type OneKeyReleaser interface {
	BatchReleaser
	ReleasesOneKey()
}

// BatchLocker is an executor that creates and locks the semaphores of
// many keys in a fixed number of statements, however many keys there
// are, so admitting a batch over many keys costs a constant number of
// round trips. Without it, keys are locked and saved one by one.
type BatchLocker interface {
	// SemaphoreLockMany creates each missing semaphore of limits (sorted
	// by Key, distinct), as SemaphoreEnsure does, then locks them all in
	// key order until the transaction ends, and returns each one's row,
	// override and the policy of queues[i], as SemaphoreLock does, in the
	// order of limits. A concurrent create of the same key never fails it.
	SemaphoreLockMany(ctx context.Context, limits []Limit, queues []string, now time.Time) ([]Semaphore, error)
	// SemaphoreSaveMany writes each semaphore as SemaphoreSave does, in
	// one statement.
	SemaphoreSaveMany(ctx context.Context, sems []Semaphore) error
}

// SingleWriter is a driver whose write transactions take one lock for
// the whole database (SQLite): package sqlexec runs a lone write
// statement in a transaction of its own there.
type SingleWriter interface {
	SingleWriter()
}

// Beaconer is a driver whose processes also show they are alive through a
// channel that no database lock can hold up (SQLite, where a process
// frozen inside a write transaction blocks every other process's
// heartbeat: a file per process beside the database, which every process
// sharing the file can see, since SQLite's WAL needs them on one host).
// Its LostClaims, LostClaimsOfKey and DeleteDeadProcesses count a beacon
// as a heartbeat.
type Beaconer interface {
	// Beacon records that the process is alive at `at`; ErrNoBeacon when
	// this database keeps none (an in-memory one: one process).
	Beacon(processID int64, at time.Time) error
}

// ErrNoBeacon: see Beaconer.
var ErrNoBeacon = errors.New("this database keeps no process beacons")

// Notifier is a driver that can wake other processes when jobs become
// ready (PostgreSQL's LISTEN/NOTIFY). Drivers without it rely on polling.
type Notifier interface {
	// Notify tells listeners that queues have ready jobs. The sender has
	// woken its own workers already: a listener whose self is origin may
	// skip it ("" skips nowhere).
	Notify(ctx context.Context, origin string, queues []string) error
	// NotifyTx notifies inside the caller's transaction, delivered only
	// if it commits.
	NotifyTx(ctx context.Context, tx any, queues []string) error
	// Listen calls ready with each notified queue until ctx ends,
	// reconnecting (with backoff, telling failed) when its connection
	// breaks; callers poll meanwhile. Each time it starts or restarts
	// listening it calls ready with "" (every queue): what was notified
	// before then may be lost, so every worker looks once. It may skip what
	// Notify sent with origin self (never what NotifyTx sent).
	Listen(ctx context.Context, self string, ready func(queue string), failed func(error)) error
}
