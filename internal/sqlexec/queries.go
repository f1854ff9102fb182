package sqlexec

import "github.com/bqueue/bq/internal/sqltext"

// Queries are the statements the Executor runs, in a dialect's spelling.
// Common fills those both dialects spell alike; a driver sets the rest.
// The arguments are bound in the order the Executor method running each
// statement passes them; a key travels as the dialect's KeyArgs (looked
// up) or KeyIndex (matched on its index), a queue as its Text.
type Queries struct {
	// SharedQueries are those of the methods every dialect runs alike
	// (Shared).
	SharedQueries

	// Multi-row INSERTs, up to VALUES: the rows follow (Values).
	InsertJobs, InsertReady, InsertScheduled, InsertBlocked string
	// InsertJobKeys is up to VALUES of the job_keys rows of multi-key
	// jobs: the job id, then the key's KeyArgs.
	InsertJobKeys string

	FinishJob, DeleteJobs, RecordError, InsertFailed string

	HasReady, Gate, RunningSlots, PickReady, PickAmong, PickHandOff, DeleteReady, InsertClaims, SelectClaims string
	DeleteClaim                                                                                              string
	// The set-wise end of claims (ClaimCompleteMany; a dialect ending them its
	// own way, SQLite, leaves them empty). LockEnding reads fence, job_id,
	// has_dependents of the listed fences, locking them and their jobs; DeleteClaims deletes the listed
	// fences; FinishJobs completes the listed jobs (arg: finished_at).
	LockEnding, DeleteClaims, FinishJobs string
	Release                              ReleaseQueries // release.go
	Admit                                AdmitQueries   // admit.go
	Multi                                MultiQueries   // multibatch.go

	SemEnsure, SemLock, SemTryLock, SemSave, PickBlocked, DeleteBlocked, CountHolders string
	// SemLockRow locks a semaphore's row alone, before SemLock reads it
	// (empty on a single writer, whose transaction holds the one lock).
	SemLockRow string
	// LineListHeads reads the first blocked rows of a key's line (args: its
	// KeyIndex, how many) as job_id, queue, priority, then the job's
	// Limit columns and more_keys. LineMove sets a blocked row's key
	// (args: the new key's Text, the job id, the old key's Text).
	LineHeads, MoveToLine string

	ExpiredSems, PromotableSems, AllSems, PickIdleSems, DeleteSems string

	HasDueScheduled, PickDueScheduled, DeleteScheduled, SelectJobs, DeleteFinished string

	Heartbeat, ProcessExists string

	PolicyKeys, LatestJobLimit string
	// PolicyMoreKeys reads the more_keys of a queue's live multi-key jobs
	// (their further keys left to the policy are picked in Go);
	// LatestMultiJob the newest live job naming a key (its KeyIndex) in
	// job_keys.
	PolicyMoreKeys, LatestMultiJob string

	// UniqueLock is the dialect's (MySQL: its lock row's upsert; SQLite:
	// none, its one writer serialises); a dialect may append its locking
	// read to UniqueGet (see unique.go).
	LockUnique, FindUnique, SetUniqueKey, UniqueKeyOf string
	// Spell splices the table prefix into a statement built at run time
	// (ListJobs).
	Spell func(string) string
	// Cancel (cancel.go).
	CancelJob, ClaimFence, MarkCancel, CancelMark string

	// Rate (rate.go) is the dialect's: Rates with its RateSpelling.
	Rate RateQueries
}

// Common returns the statements both database/sql dialects spell alike,
// those every dialect spells alike among them (SharedStatements), each
// passed through spell (see sqltext.Spelling), those that read a key's
// rows as keys says.
func Common(spell func(string) string, keys KeySpelling) Queries {
	p := spell
	q := Queries{
		SharedQueries: SharedStatements(spell),
		Spell:         spell,
		InsertJobs: p(`INSERT INTO {p}jobs (kind, queue, args, priority, max_attempts, concurrency_key,
	concurrency_limit, concurrency_duration_ms, on_conflict, max_blocked, scheduled_at, created_at,
	metadata, tags, rate_key, rate_limit, rate_period_ms, more_keys, sequence, slots) VALUES `),
		InsertReady:     p(`INSERT INTO {p}ready_executions (job_id, queue, priority, created_at) VALUES `),
		InsertScheduled: p(`INSERT INTO {p}scheduled_executions (job_id, queue, priority, scheduled_at) VALUES `),
		InsertBlocked:   p(`INSERT INTO {p}blocked_executions (job_id, queue, priority, concurrency_key, created_at) VALUES `),

		FindUnique:   p(sqltext.FindUnique),
		SetUniqueKey: p(`UPDATE {p}jobs SET unique_key = ? WHERE id = ?`),
		UniqueKeyOf:  p(`SELECT coalesce(max(unique_key), '') FROM {p}jobs WHERE id = ?`),

		FinishJob:   p(`UPDATE {p}jobs SET attempt = attempt + ?, finished_at = ?, discarded = ? WHERE id = ?`),
		RecordError: p(`UPDATE {p}jobs SET attempt = attempt + 1, last_error = ? WHERE id = ?`),
		InsertFailed: p(`INSERT INTO {p}failed_executions (job_id, queue, error, failed_at)
SELECT id, queue, ?, ? FROM {p}jobs WHERE id = ?`),

		// The claim's gate: the queue's pause, its cap (0: none) and its
		// fair share, in one read; a dialect with row locks locks the
		// policy row (MySQL).
		Gate: p(`SELECT coalesce(c.max_active, 0), EXISTS (SELECT 1 FROM {p}paused_queues z WHERE z.queue = q.queue),
	coalesce(c.fair_share, FALSE), coalesce(c.key_weight, 0)
FROM (SELECT ? AS queue) q LEFT JOIN {p}policies c ON c.queue = q.queue AND ` + sqltext.ClaimedByRule),
		HasReady: p(`SELECT EXISTS (SELECT 1 FROM {p}ready_executions WHERE queue = ?)`),
		SelectClaims: p(`SELECT ` + sqltext.JobColumns + `, c.fence, c.claimed_at
FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id
WHERE c.job_id IN ` + ListMarker + ` ORDER BY j.priority DESC, j.id`),
		DeleteClaim: p(`DELETE FROM {p}claimed_executions WHERE fence = ? AND job_id = ?`),

		HasDueScheduled: p(`SELECT EXISTS (SELECT 1 FROM {p}scheduled_executions WHERE scheduled_at <= ?)`),
		SelectJobs: p(`SELECT ` + sqltext.JobColumns + ` FROM {p}jobs j WHERE j.id IN ` + ListMarker +
			` ORDER BY j.priority DESC, j.id`),

		Heartbeat:     p(`UPDATE {p}processes SET last_heartbeat_at = ?, beating_since = ? WHERE id = ?`),
		ProcessExists: p(`SELECT EXISTS (SELECT 1 FROM {p}processes WHERE id = ?)`),

		PolicyKeys: p(`SELECT DISTINCT concurrency_key FROM {p}jobs WHERE queue = ? AND concurrency_limit = 0
AND concurrency_key IS NOT NULL AND finished_at IS NULL ORDER BY 1`),
		PolicyMoreKeys: p(`SELECT more_keys FROM {p}jobs WHERE queue = ? AND more_keys IS NOT NULL AND finished_at IS NULL`),

		CancelJob: p(`UPDATE {p}jobs SET attempt = attempt + ?, finished_at = ?, cancelled = ?,
	last_error = coalesce(nullif(?, ''), last_error) WHERE id = ?`),
		// The mark is set by fence alone: MySQL then locks the claim's
		// primary key only, never its job_id index entry, which the run's
		// end (ClaimDelete) takes after the primary key: the two cannot
		// deadlock.
		ClaimFence: p(`SELECT fence FROM {p}claimed_executions WHERE job_id = ?`),
		MarkCancel: p(`UPDATE {p}claimed_executions SET cancel_requested_at = coalesce(cancel_requested_at, ?) WHERE fence = ?`),
		CancelMark: p(`SELECT cancel_requested_at FROM {p}claimed_executions WHERE fence = ?`),
		// A blocked row's key is its line; MySQL's hash column is
		// generated from it.
		MoveToLine: p(`UPDATE {p}blocked_executions SET concurrency_key = ? WHERE job_id = ? AND concurrency_key = ?`),
	}
	q.CountHolders, q.LineHeads, q.LatestJobLimit, q.LatestMultiJob = keyStatements(p, keys)
	return q
}

// AmongPick is the pick of a fair-share claim (ReadyClaim with Among),
// list the dialect's spelling of the ids' list and lock its locking
// clause: the jobs among the list ready in the queue, none of a paused
// key (notPaused spells sqltext.KeyNotPaused of a job id). Args: queue,
// the ids, max.
func AmongPick(list, lock string, notPaused func(id string) string) string {
	// No ORDER BY: the ids are at most max, and an order would have the
	// ready line's index walked to find them.
	return `SELECT job_id FROM {p}ready_executions WHERE queue = ? AND job_id IN ` + list + `
	AND ` + notPaused(`{p}ready_executions.job_id`) + `
LIMIT ?` + lock
}

// HandOffPick is the pick of a hand-off (ReadyClaimHandOff), list the
// dialect's spelling of the ids' list and lock its locking clause: the
// jobs among the list ready in the queue with no rate key, from a queue
// with no cap that is not paused, none of a paused key (notPaused, as
// AmongPick's). Args: queue, the ids, queue, queue, max.
func HandOffPick(list, lock string, notPaused func(id string) string) string {
	return `SELECT r.job_id FROM {p}ready_executions r JOIN {p}jobs j ON j.id = r.job_id
WHERE r.queue = ? AND r.job_id IN ` + list + ` AND j.rate_key IS NULL AND ` + notPaused(`r.job_id`) + `
	AND NOT EXISTS (SELECT 1 FROM {p}policies c WHERE c.queue = ? AND ` + sqltext.ClaimedByRule + `)
	AND NOT EXISTS (SELECT 1 FROM {p}paused_queues z WHERE z.queue = ?)
ORDER BY r.priority DESC, r.job_id LIMIT ?` + lock
}
