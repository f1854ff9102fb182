// Package sqltext holds the SQL every dialect spells alike: column lists
// and expressions over bq's tables, with {p} for the table prefix, so
// that a rule such as which table means which job state is written once.
package sqltext

import (
	"cmp"
	"strings"
)

// Spelling returns a function splicing prefix in for {p} in a statement,
// then making the changes of more (old, new, old, new, ...).
func Spelling(prefix string, more ...string) func(string) string {
	return strings.NewReplacer(append([]string{"{p}", prefix}, more...)...).Replace
}

// JobColumns are the columns of a job row as the drivers scan it, of
// jobs aliased j.
const JobColumns = jobColumnsHead + `j.scheduled_at` + jobColumnsTail

const (
	jobColumnsHead = `j.id, j.kind, j.queue, j.args, j.priority, j.attempt, j.max_attempts,
	coalesce(j.concurrency_key, ''), j.concurrency_limit, j.concurrency_duration_ms, j.on_conflict,
	j.max_blocked, `
	jobColumnsTail = `, j.created_at, j.metadata, j.tags, coalesce(j.rate_key, ''), j.rate_limit, j.rate_period_ms, j.more_keys, j.sequence, j.has_dependents, j.slots`
)

// ClaimedByRule is the condition on a queue's policy row c under which
// the queue is claimed only by the claim rule's transaction
// (driver.ClaimWithin): it has a cap or fair share.
const ClaimedByRule = `(c.max_active > 0 OR c.fair_share = TRUE)`

// ReadyByKey reads a fair-share queue's first ready jobs in claim order
// (priority, then id: the ready line's index order) with each one's key
// (empty for none), the key's weight (0: none) and the largest weight any
// key has (0: none has); then, in the same statement, the slots its
// running jobs use by key (as RunningByKey): one round trip of the claim's
// transaction, which holds the queue's policy row. A column tells the
// parts apart: 0 for a ready job (key, job id, slots, weight, largest
// weight), 1 for a key's running slots (key, 0, slots, 0, 0). The caller
// keeps each key's first jobs (driver.ReadyByKey): a window ranking them
// in SQL sorts the rows by key and costs twice the read. The jobs and
// weights are joined to the rows taken only, so a claim that reads the
// line's head pays for the head. Jobs of a paused key are left out: they
// take no share. Args: queue, the most rows to read, queue.
func ReadyByKey(f FairRead) string {
	running := cmp.Or(f.Running, RunningByKey)
	return `SELECT 0, coalesce(j.concurrency_key, ''), r.job_id, j.slots,
	CASE WHEN ` + MaxWeight + ` > 0 THEN coalesce((SELECT w.weight FROM {p}key_weights w WHERE ` + f.WeightOn + `), 0) ELSE 0 END,
	` + MaxWeight + `, r.priority
FROM (SELECT job_id, priority` + f.ReadCols + ` FROM {p}ready_executions WHERE queue = ? AND ` + f.NotPaused + `
	ORDER BY priority DESC, job_id LIMIT ?) r
` + f.JobsOf + `
UNION ALL
` + running + `
ORDER BY 1, 7 DESC, 3`
}

// FairRead is how a dialect spells ReadyByKey's parts.
type FairRead struct {
	// JobsOf joins each ready row r taken to j, its job's concurrency_key
	// and slots (ReadyJobs, or a dialect's spelling that keeps it a probe
	// per row, or one that reads the row's own columns).
	JobsOf string
	// WeightOn matches key_weights w to j.
	WeightOn string
	// NotPaused leaves out jobs of paused keys (KeyNotPaused of
	// {p}ready_executions.job_id).
	NotPaused string
	// ReadCols are further columns of the ready rows r holds (", a, b").
	ReadCols string
	// Running is the running part (RunningByKey when empty).
	Running string
}

// MaxWeight is the largest weight a key has of its own (0: none has).
// ReadyByKey reads each row's key weight only when some key has one: a
// probe a row of an empty table cost 0.5 ms of a 4.4 ms head read.
const MaxWeight = `(SELECT coalesce(max(mw.weight), 0) FROM {p}key_weights mw)`

// ReadyJobs is ReadyByKey's join of the rows taken r to their jobs j.
const ReadyJobs = `JOIN {p}jobs j ON j.id = r.job_id`

// KeyNotPaused is the condition that the job whose id is the expression
// id has no paused key (PauseKey): neither its concurrency key nor, for a
// multi-key job, one of its further keys (job_keys). firstOn matches a
// paused_keys row pk to the job pj's concurrency key, moreOn pk to a
// job_keys row jk (MySQL matches by hash, then key). While no key is
// paused, the first subquery, uncorrelated, is all a statement reads of
// it: one probe of an empty table.
func KeyNotPaused(id, firstOn, moreOn string) string {
	return `(NOT EXISTS (SELECT 1 FROM {p}paused_keys)
	OR NOT EXISTS (SELECT 1 FROM {p}jobs pj WHERE pj.id = ` + id + ` AND (
		EXISTS (SELECT 1 FROM {p}paused_keys pk WHERE ` + firstOn + `)
		OR (pj.more_keys IS NOT NULL AND EXISTS (SELECT 1 FROM {p}job_keys jk JOIN {p}paused_keys pk ON ` + moreOn + `
			WHERE jk.job_id = pj.id)))))`
}

// KeyNotPausedCall is KeyNotPaused with its correlated part a call of the
// schema's function fn (PostgreSQL's job_key_paused): planned as one call.
func KeyNotPausedCall(id, fn string) string {
	return `(NOT EXISTS (SELECT 1 FROM {p}paused_keys) OR NOT {p}` + fn + `(` + id + `))`
}

// KeyNotPausedOf is KeyNotPaused as SQLite (and sqlexec's shared
// statements) spell it.
func KeyNotPausedOf(id string) string {
	return KeyNotPaused(id, `pk.key = pj.concurrency_key`, `pk.key = jk.key`)
}

// RunningByKey is ReadyByKey's second part: the slots of a queue's
// claimed jobs summed by key (empty for those with none), a job of k
// slots using k of the key's share. Args: queue.
const RunningByKey = `SELECT 1, coalesce(j.concurrency_key, ''), 0, sum(j.slots), 0, 0, 0
FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id WHERE c.queue = ? GROUP BY j.concurrency_key`

// PolicyColumns are the columns of a policy row, in scanning order.
const PolicyColumns = `queue, namespace, max_active, max_active_per_key, max_blocked,
	max_starts_per_key, starts_period_ms, fair_share, key_weight, max_wait_us, adaptive_min, created_at, updated_at`

// PeriodicColumns are the columns of a periodic schedule's row, in
// scanning order.
const PeriodicColumns = `name, kind, schedule, next_run_at, last_run_at, last_job_id, last_state, created_at, seen_at`

// JobState is the state of job j (driver.JobState), by which table holds
// it.
const JobState = `CASE
		WHEN EXISTS (SELECT 1 FROM {p}claimed_executions x WHERE x.job_id = j.id) THEN 'running'
		WHEN EXISTS (SELECT 1 FROM {p}ready_executions x WHERE x.job_id = j.id) THEN 'ready'
		WHEN EXISTS (SELECT 1 FROM {p}blocked_executions x WHERE x.job_id = j.id) THEN 'blocked'
		WHEN EXISTS (SELECT 1 FROM {p}scheduled_executions x WHERE x.job_id = j.id) THEN 'scheduled'
		WHEN EXISTS (SELECT 1 FROM {p}waiting_executions x WHERE x.job_id = j.id) THEN 'waiting'
		WHEN EXISTS (SELECT 1 FROM {p}failed_executions x WHERE x.job_id = j.id) THEN 'failed'
		WHEN j.discarded THEN 'discarded'
		WHEN j.cancelled THEN 'cancelled'
		WHEN j.finished_at IS NOT NULL THEN 'completed'
		ELSE ''
	END`

// QueueCounts counts each queue's jobs in each live state, a row per
// queue and state table, as columns queue, ready, running, scheduled,
// blocked, failed, waiting: a dialect sums them per queue, casting the sums its
// own way.
const QueueCounts = `
	SELECT queue, count(*) AS ready, 0 AS running, 0 AS scheduled, 0 AS blocked, 0 AS failed, 0 AS waiting
		FROM {p}ready_executions GROUP BY queue
	UNION ALL SELECT j.queue, 0, count(*), 0, 0, 0, 0
		FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id GROUP BY j.queue
	UNION ALL SELECT queue, 0, 0, count(*), 0, 0, 0 FROM {p}scheduled_executions GROUP BY queue
	UNION ALL SELECT queue, 0, 0, 0, count(*), 0, 0 FROM {p}blocked_executions GROUP BY queue
	UNION ALL SELECT queue, 0, 0, 0, 0, count(*), 0 FROM {p}failed_executions GROUP BY queue
	UNION ALL SELECT queue, 0, 0, 0, 0, 0, count(*) FROM {p}waiting_executions GROUP BY queue
`

// JobCountByQueue sums QueueCounts per queue, each sum of column col
// spelled by sum: a dialect casts it its own way.
func CountByQueue(sum func(col string) string) string {
	return `SELECT queue, ` + sum("ready") + `, ` + sum("running") + `, ` + sum("scheduled") + `, ` + sum("blocked") + `, ` +
		sum("failed") + `, ` + sum("waiting") + `
FROM (` + QueueCounts + `) t GROUP BY queue ORDER BY queue`
}

// ExecutionGet reads the execution row of job j, whatever table holds it,
// and its claim's process; a dialect adds the WHERE naming the job.
const JobExecution = `
SELECT r.created_at, b.created_at, s.scheduled_at, c.claimed_at, f.failed_at,
	coalesce(c.process_id, 0), coalesce(p.name, ''), p.last_heartbeat_at, c.cancel_requested_at, coalesce(c.fence, 0)
FROM {p}jobs j
LEFT JOIN {p}ready_executions r ON r.job_id = j.id
LEFT JOIN {p}blocked_executions b ON b.job_id = j.id
LEFT JOIN {p}scheduled_executions s ON s.job_id = j.id
LEFT JOIN {p}claimed_executions c ON c.job_id = j.id
LEFT JOIN {p}failed_executions f ON f.job_id = j.id
LEFT JOIN {p}processes p ON p.id = c.process_id
`

// StrandedJobs lists unfinished jobs after the first argument (an id)
// whose state rows are not exactly one (ready, blocked, scheduled,
// claimed, failed or waiting), with how many they have, up to the second
// argument; one statement, so a job moving between two tables is seen on
// one side of its move.
const StrandedJobs = `
SELECT id, n FROM (SELECT j.id AS id,
	(SELECT count(*) FROM {p}ready_executions r WHERE r.job_id = j.id)
	+ (SELECT count(*) FROM {p}blocked_executions b WHERE b.job_id = j.id)
	+ (SELECT count(*) FROM {p}scheduled_executions s WHERE s.job_id = j.id)
	+ (SELECT count(*) FROM {p}claimed_executions c WHERE c.job_id = j.id)
	+ (SELECT count(*) FROM {p}failed_executions f WHERE f.job_id = j.id)
	+ (SELECT count(*) FROM {p}waiting_executions w WHERE w.job_id = j.id) AS n
	FROM {p}jobs j WHERE j.finished_at IS NULL AND j.id > ?) t
WHERE n <> 1 ORDER BY id LIMIT ?`

// FailedJobs reads failed jobs f with their job rows; a dialect adds the
// WHERE and the page.
const FailedJobs = `
SELECT f.job_id, j.kind, f.queue, coalesce(j.concurrency_key, ''), j.attempt, f.error, f.failed_at
FROM {p}failed_executions f JOIN {p}jobs j ON j.id = f.job_id
`

// UniqueGet reads the newest job of a unique key (the first argument)
// whose state is in a list (the dialect's ListMarker), by the partial
// index on unique_key; a dialect may append a locking clause.
const FindUnique = `SELECT j.id, ` + JobState + `
FROM {p}jobs j WHERE j.unique_key = ? AND ` + JobState + ` IN (/*list*/)
ORDER BY j.id DESC LIMIT 1`

// SequenceUnheld masks jobs.sequence's bits but driver.SequenceHeld.
const SequenceUnheld = "5"

// HeldSlot is the condition that job j is a sequence's job that holds its
// key's slot while scheduled (a retry, a snooze) or failed (a sequence
// that halts): the driver.SequenceHeld bit of jobs.sequence, and a row in
// one of those tables.
const HeldSlot = `((j.sequence & 2) <> 0 AND (EXISTS (SELECT 1 FROM {p}scheduled_executions s WHERE s.job_id = j.id)
		OR EXISTS (SELECT 1 FROM {p}failed_executions f WHERE f.job_id = j.id)))`

// HeldColumn is whether job j, not claimed by claim c, is a HeldSlot
// holder, as a holder listing reads it.
const HeldColumn = `(j.sequence & 2) <> 0 AND c.job_id IS NULL`
