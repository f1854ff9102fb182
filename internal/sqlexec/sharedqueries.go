package sqlexec

import "github.com/bqueue/bq/internal/sqltext"

// SharedQueries are the statements Shared runs. SharedStatements fills
// those every dialect spells alike; a dialect sets the rest (GroupStats,
// HolderList, JobCountByQueue) and spells its own way any it must (an
// upsert, a list, a locking read). The arguments are bound in the order
// the Shared method running each statement passes them: a key as the
// Conn's KeyArgs, a queue or a name as its Text, a time as its Time.
type SharedQueries struct {
	// PauseQueue inserts the queue's row unless it exists, affecting no
	// row then.
	PauseQueue, ResumeQueue, PausedQueues string
	// PauseKey, ResumeKey and PausedKeys do the same for keys.
	PauseKey, ResumeKey, PausedKeys string
	// Adaptive limits (key_adapt): read one key's (its KeyArgs), upsert
	// (KeyArgs, lim, min, successes, adapted_at), delete (KeyArgs) and
	// list (max).
	GetKeyAdapt, SetKeyAdapt, DeleteKeyAdapt, ListKeyAdapt string

	// PolicyLockMany reads the policies of a namespace and of a list of
	// queues (Conn.Names), locking them where the dialect has row locks.
	// PolicyInsert affects no row when the queue has one.
	LockPolicies, InsertPolicy, UpdatePolicy, DeletePolicy, ListPolicies string
	PolicyRate, PolicyRateKeys, SetKeyLimit, DeleteKeyLimit              string
	// Fair share: a queue's ready jobs by key and its running jobs by
	// key (ReadyByKey), and the keys' weights. ReadyPerKey, where a
	// dialect has it (its ready rows carry their key), is ReadyByKey
	// reading each key's first jobs (driver.KeyViewParams.PerKey), its
	// LIMIT a key's. FillReadyKeys, where a dialect has it, runs before
	// ReadyPerKey in the same transaction and gives the queue's ready
	// rows that lack it their key (MySQL: its ready rows are made
	// without); args: queue.
	ReadyByKey, ReadyPerKey, FillReadyKeys, SetKeyWeight, DeleteKeyWeight, KeyWeights string
	// A debounced enqueue joining a waiting job: its scheduled row moved
	// if still not due, then its row's due time and args.
	DebounceScheduled, DebounceJob string
	// A sequence's job holding its key's slot while scheduled, or not.
	HoldSlot string

	Periodic PeriodicQueries // periodic.go

	// PassLook is driver.PassLook's read, one EXISTS a step: args now,
	// now (the conditions of HasDueScheduled, the dialects'
	// SemaphoreListExpired and SemaphoreListPromotable, and
	// Dependencies.ListEnded).
	PassLook string

	// RegisterProcess is a one-row INSERT, up to VALUES (Conn.InsertID).
	RegisterProcess, ClaimsOfProcess, DeregisterProcess, ListProcesses string

	GetJob, CountByQueue, SchemaVersion, ReadyAges, GroupStats, TopBlockedKeys string
	// HolderList takes the key's KeyArgs twice (its jobs by
	// concurrency_key, then by job_keys), then max; LineCountAhead the
	// key's KeyArgs, the priority twice, the job id and max.
	ReadSem, KeyHolders, BlockedAhead, BlockedLine, JobExecution, ListFailed, StrandedJobs string

	// ExecutionDelete deletes one job's row of each execution table a
	// cancel takes a job out of, by its id.
	DeleteExecution Executions
	DeleteFailed    string
	// ClaimCancelRequested is a locking read on a dialect with row locks
	// (FOR UPDATE appended).
	CancelRequested string
	// Inbox is the inbox's (inbox.go): each dialect spells it
	// (InboxStatements).
	Inbox InboxQueries
	// Dependencies are the statements of dependencies.go.
	Dependencies DependencyQueries
	// ClockNow reads the server's clock; "" for a database with no clock
	// of its own (SQLite's is its host's).
	ClockNow string
}

// SharedStatements returns the statements every dialect spells alike,
// each passed through spell: sqltext.Spelling, and on PostgreSQL
// sqltext.Rebind after it.
func SharedStatements(spell func(string) string) SharedQueries {
	p := spell
	return SharedQueries{
		PauseQueue:   p(`INSERT INTO {p}paused_queues (queue, paused_at) VALUES (?, ?) ON CONFLICT (queue) DO NOTHING`),
		ResumeQueue:  p(`DELETE FROM {p}paused_queues WHERE queue = ?`),
		PausedQueues: p(`SELECT queue, paused_at FROM {p}paused_queues ORDER BY queue`),
		PauseKey:     p(`INSERT INTO {p}paused_keys (key, paused_at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`),
		ResumeKey:    p(`DELETE FROM {p}paused_keys WHERE key = ?`),
		PausedKeys:   p(`SELECT key, paused_at FROM {p}paused_keys ORDER BY key`),
		GetKeyAdapt:  p(`SELECT key, lim, min_lim, successes, adapted_at FROM {p}key_adapt WHERE key = ?`),
		SetKeyAdapt: p(`INSERT INTO {p}key_adapt (key, lim, min_lim, successes, adapted_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET lim = excluded.lim, min_lim = excluded.min_lim, successes = excluded.successes,
	adapted_at = excluded.adapted_at`),
		DeleteKeyAdapt: p(`DELETE FROM {p}key_adapt WHERE key = ?`),
		ListKeyAdapt:   p(`SELECT key, lim, min_lim, successes, adapted_at FROM {p}key_adapt ORDER BY key LIMIT ?`),

		LockPolicies: p(`SELECT ` + sqltext.PolicyColumns + ` FROM {p}policies
WHERE namespace = ? OR queue IN ` + ListMarker + ` ORDER BY queue`),
		InsertPolicy: p(`INSERT INTO {p}policies (queue, namespace, max_active, max_active_per_key, max_blocked,
	max_starts_per_key, starts_period_ms, fair_share, key_weight, max_wait_us, adaptive_min, created_at, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (queue) DO NOTHING`),
		UpdatePolicy: p(`UPDATE {p}policies SET max_active = ?, max_active_per_key = ?, max_blocked = ?,
	max_starts_per_key = ?, starts_period_ms = ?, fair_share = ?, key_weight = ?, max_wait_us = ?, adaptive_min = ?,
	updated_at = ? WHERE queue = ?`),
		DeletePolicy: p(`DELETE FROM {p}policies WHERE queue = ?`),
		ListPolicies: p(`SELECT ` + sqltext.PolicyColumns + ` FROM {p}policies ORDER BY queue`),
		PolicyRate:   p(`SELECT max_starts_per_key, starts_period_ms FROM {p}policies WHERE queue = ?`),
		PolicyRateKeys: p(`SELECT DISTINCT rate_key FROM {p}jobs WHERE queue = ? AND rate_limit = 0
AND rate_key IS NOT NULL AND finished_at IS NULL ORDER BY 1`),
		SetKeyLimit: p(`INSERT INTO {p}key_limits (key, lim, updated_at) VALUES (?, ?, ?)
ON CONFLICT (key) DO UPDATE SET lim = excluded.lim, updated_at = excluded.updated_at`),
		DeleteKeyLimit: p(`DELETE FROM {p}key_limits WHERE key = ?`),

		ReadyByKey: p(sqltext.ReadyByKey(sqltext.FairRead{JobsOf: sqltext.ReadyJobs, WeightOn: `w.key = j.concurrency_key`,
			NotPaused: sqltext.KeyNotPausedOf(`{p}ready_executions.job_id`)})),
		SetKeyWeight: p(`INSERT INTO {p}key_weights (key, weight, updated_at) VALUES (?, ?, ?)
ON CONFLICT (key) DO UPDATE SET weight = excluded.weight, updated_at = excluded.updated_at`),
		DeleteKeyWeight: p(`DELETE FROM {p}key_weights WHERE key = ?`),
		KeyWeights:      p(`SELECT key, weight, updated_at FROM {p}key_weights ORDER BY key`),

		DebounceScheduled: p(`UPDATE {p}scheduled_executions SET scheduled_at = ? WHERE job_id = ? AND scheduled_at > ?`),
		DebounceJob:       p(`UPDATE {p}jobs SET scheduled_at = ?, args = coalesce(?, args) WHERE id = ?`),
		HoldSlot:          p(`UPDATE {p}jobs SET sequence = (sequence & ` + sqltext.SequenceUnheld + `) | ? WHERE id = ? AND sequence > 0`),

		Periodic: periodicQueries(p),

		RegisterProcess: p(`INSERT INTO {p}processes (kind, name, hostname, pid, queues, heartbeat_interval_ms,
	dead_after_ms, started_at, last_heartbeat_at, beating_since) VALUES `),
		ClaimsOfProcess: p(`SELECT job_id, fence, claimed_at, cancel_requested_at IS NOT NULL
FROM {p}claimed_executions WHERE process_id = ?`),
		DeregisterProcess: p(`DELETE FROM {p}processes WHERE id = ?`),
		// The flags in one row, joined to every process's id and beat:
		// at least one row, its process columns NULL when none is
		// registered.
		PassLook: p(`SELECT f.due, f.expired, f.promotable, f.ended, p.id, p.last_heartbeat_at FROM (SELECT
	EXISTS (SELECT 1 FROM {p}scheduled_executions WHERE scheduled_at <= ?) AS due,
	EXISTS (SELECT 1 FROM {p}semaphores WHERE expires_at < ? AND (value < lim OR blocked > 0)) AS expired,
	EXISTS (SELECT 1 FROM {p}semaphores WHERE value > 0 AND blocked > 0) AS promotable,
	EXISTS (SELECT 1 FROM {p}dependencies d LEFT JOIN {p}jobs j ON j.id = d.depends_on
		WHERE j.id IS NULL OR j.finished_at IS NOT NULL
		OR EXISTS (SELECT 1 FROM {p}failed_executions f WHERE f.job_id = d.depends_on)) AS ended) f
LEFT JOIN {p}processes p ON 1 = 1
ORDER BY p.id`),
		ListProcesses: p(`SELECT id, kind, name, hostname, pid, queues, heartbeat_interval_ms, dead_after_ms,
	started_at, last_heartbeat_at, beating_since FROM {p}processes ORDER BY id`),

		GetJob:        p(`SELECT ` + sqltext.JobInfoColumns + ` FROM {p}jobs j WHERE j.id = ?`),
		SchemaVersion: p(`SELECT coalesce(max(version_id), 0) FROM {p}schema_migrations WHERE is_applied`),
		ReadyAges:     p(`SELECT queue, min(created_at) FROM {p}ready_executions GROUP BY queue ORDER BY queue`),
		TopBlockedKeys: p(`SELECT key, value, lim, blocked, multi, duration_ms, expires_at, release_interval_us FROM {p}semaphores
WHERE blocked > 0 ORDER BY blocked DESC, key LIMIT ?`),
		ReadSem: p(`SELECT value, lim, blocked, multi, duration_ms, expires_at, release_interval_us FROM {p}semaphores WHERE key = ?`),
		BlockedAhead: p(`SELECT count(*) FROM (SELECT 1 FROM {p}blocked_executions
WHERE concurrency_key = ? AND (priority > ? OR (priority = ? AND job_id < ?)) LIMIT ?) ahead`),
		BlockedLine: p(`
SELECT b.job_id, j.kind, b.queue, b.priority, b.created_at
FROM {p}blocked_executions b JOIN {p}jobs j ON j.id = b.job_id
WHERE b.concurrency_key = ? ORDER BY b.priority DESC, b.job_id LIMIT ?`),
		JobExecution: p(sqltext.JobExecution + `WHERE j.id = ?`),
		StrandedJobs: p(sqltext.StrandedJobs),
		ListFailed:   p(sqltext.FailedJobs + `WHERE f.job_id < ? ORDER BY f.job_id DESC LIMIT ?`),

		DeleteExecution: Executions{
			Ready:     p(`DELETE FROM {p}ready_executions WHERE job_id = ?`),
			Scheduled: p(`DELETE FROM {p}scheduled_executions WHERE job_id = ?`),
			Blocked:   p(`DELETE FROM {p}blocked_executions WHERE job_id = ?`),
			Waiting:   p(`DELETE FROM {p}waiting_executions WHERE job_id = ?`),
		},
		Dependencies:    dependencyStatements(p),
		DeleteFailed:    p(`DELETE FROM {p}failed_executions WHERE job_id = ?`),
		CancelRequested: p(`SELECT cancel_requested_at IS NOT NULL FROM {p}claimed_executions WHERE fence = ? AND job_id = ?`),
	}
}
