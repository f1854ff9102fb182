package sqlite

import (
	"strings"

	"github.com/bqueue/bq/internal/sqlinspect"
)

// queries holds every statement with the table prefix spliced in once.
// Times are Unix microseconds; id lists travel as JSON arrays read with
// json_each, so no statement is built from data.
type queries struct {
	// Multi-row inserts: the statement up to VALUES; see insertRows.
	insertJobs, insertReady, insertScheduled, insertBlocked string

	hasReady, pickReady, deleteReady, insertClaims, selectClaims  string
	deleteClaim, finishJob, deleteJobs, recordError, insertFailed string

	semEnsure, semLock, semTryLock, semSave, pickBlocked, promoteReady, deleteBlocked, countHolders string

	endClaims, finishJobs, readSems, pickBlockedOfKeys, settleKeys string

	hasDueScheduled, pickDueScheduled, deleteScheduled, selectJobs string
	expiredSems, promotableSems, deleteIdleSems                    string
	deadProcesses, claimsOfDead, lostClaimsOfKey, deleteFinished   string
	registerProcess, heartbeat, renewSems, deregisterProcess       string
	deleteProcesses, listProcesses, getJob, countByQueue           string
	claimsOfProcess                                                string
	schemaVersion                                                  string

	policyCap, countClaimed                                                          string
	lockPolicies, insertPolicy, updatePolicy, deletePolicy, listPolicies, policyKeys string
	setKeyLimit, deleteKeyLimit, latestJobLimit                                      string

	readyAges, groupStats, topBlockedKeys, readSem, keyHolders string
	blockedAhead, blockedLine, jobExecution, listFailed        string
	inspect                                                    sqlinspect.Queries
	deleteFailed                                               string

	history historyQueries // history.go
}

const policyColumns = `queue, namespace, max_active, max_active_per_key, max_blocked, created_at, updated_at`

const jobColumns = `j.id, j.kind, j.queue, j.args, j.priority, j.attempt, j.max_attempts,
	coalesce(j.concurrency_key, ''), j.concurrency_limit, j.concurrency_duration_ms, j.on_conflict,
	j.max_blocked, j.scheduled_at, j.created_at`

const idList = `(SELECT value FROM json_each(?))`

// The row of each multi-row insert.
const (
	jobRow       = `(?, ?, ?, ?, ?, NULLIF(?, ''), ?, ?, ?, ?, ?, ?)`
	executionRow = `(?, ?, ?, ?)`
	blockedRow   = `(?, ?, ?, ?, ?)`
)

// deadFor is the condition that process p (the row, aliased p) is dead at
// ?1 after a silence of silenceMS: it has been silent that long, and
// another process's heartbeats landed without a gap for as long within
// that silence, so the database was writable and the silence is p's own
// (driver package doc, "Dead processes"). Times are microseconds.
func deadFor(silenceMS string) string {
	return `p.last_heartbeat_at < ?1 - ` + silenceMS + ` * 1000
	AND EXISTS (SELECT 1 FROM {p}processes q WHERE q.id <> p.id
		AND q.last_heartbeat_at - max(p.last_heartbeat_at, q.beating_since) > ` + silenceMS + ` * 1000)`
}

func newQueries(prefix string) *queries {
	p := func(s string) string { return strings.ReplaceAll(s, "{p}", prefix) }
	q := &queries{
		insertJobs: p(`INSERT INTO {p}jobs (kind, queue, args, priority, max_attempts, concurrency_key,
	concurrency_limit, concurrency_duration_ms, on_conflict, max_blocked, scheduled_at, created_at) VALUES `),
		insertReady:     p(`INSERT INTO {p}ready_executions (job_id, queue, priority, created_at) VALUES `),
		insertScheduled: p(`INSERT INTO {p}scheduled_executions (job_id, queue, priority, scheduled_at) VALUES `),
		insertBlocked:   p(`INSERT INTO {p}blocked_executions (job_id, queue, priority, concurrency_key, created_at) VALUES `),

		hasReady: p(`SELECT EXISTS (SELECT 1 FROM {p}ready_executions WHERE queue = ?)`),
		pickReady: p(`SELECT job_id FROM {p}ready_executions WHERE queue = ?
ORDER BY priority DESC, job_id LIMIT ?`),
		deleteReady: p(`DELETE FROM {p}ready_executions WHERE job_id IN ` + idList),
		insertClaims: p(`INSERT INTO {p}claimed_executions (job_id, queue, process_id, claimed_at)
SELECT value, ?, ?, ? FROM json_each(?)`),
		selectClaims: p(`SELECT ` + jobColumns + `, c.fence, c.claimed_at
FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id
WHERE c.job_id IN ` + idList + ` ORDER BY j.priority DESC, j.id`),
		deleteClaim: p(`DELETE FROM {p}claimed_executions WHERE job_id = ? AND fence = ?`),
		finishJob: p(`UPDATE {p}jobs SET attempt = attempt + (1 - ?1), finished_at = ?2, discarded = ?1
WHERE id = ?3`),
		deleteJobs:  p(`DELETE FROM {p}jobs WHERE id IN ` + idList),
		recordError: p(`UPDATE {p}jobs SET attempt = attempt + 1, last_error = ? WHERE id = ?`),
		insertFailed: p(`INSERT INTO {p}failed_executions (job_id, queue, error, failed_at)
SELECT id, queue, ?, ? FROM {p}jobs WHERE id = ?`),

		// Set-wise completion: the claims named by (job id, fence) pairs.
		endClaims: p(`DELETE FROM {p}claimed_executions
WHERE (fence, job_id) IN (SELECT value->>1, value->>0 FROM json_each(?))
RETURNING job_id, fence`),
		finishJobs: p(`UPDATE {p}jobs SET attempt = attempt + 1, finished_at = ? WHERE id IN ` + idList),
		// Set-wise release reads the keys' semaphores, computes release
		// and promotion in Go, and writes each row once (settleKeys).
		readSems: p(`SELECT key, value, lim, blocked FROM {p}semaphores WHERE key IN ` + idList),
		// The head of each key's line, at most ?2 per key: SQLite has no
		// LATERAL and no correlated LIMIT, so the caller trims each key to
		// its free slots. Each key's scan reads only the head of its index.
		pickBlockedOfKeys: p(`
SELECT b.concurrency_key, b.job_id FROM {p}semaphores s
JOIN {p}blocked_executions b ON b.job_id IN (
	SELECT x.job_id FROM {p}blocked_executions x WHERE x.concurrency_key = s.key
	ORDER BY x.priority DESC, x.job_id LIMIT ?2)
WHERE s.key IN (SELECT value FROM json_each(?1))
ORDER BY b.concurrency_key, b.priority DESC, b.job_id`),
		// [key, free slots, blocked left, promoted] per key; a key that
		// promoted renews its expiry as Semaphore.Wait does.
		settleKeys: p(`UPDATE {p}semaphores SET value = r.v, blocked = r.b,
	expires_at = CASE WHEN r.n > 0
		THEN max({p}semaphores.expires_at, ?1 + {p}semaphores.duration_ms * 1000)
		ELSE {p}semaphores.expires_at END
FROM (SELECT value->>0 AS k, value->>1 AS v, value->>2 AS b, value->>3 AS n FROM json_each(?2)) r
WHERE {p}semaphores.key = r.k`),

		semEnsure: p(`INSERT INTO {p}semaphores (key, value, lim, blocked, duration_ms, expires_at)
VALUES (?1, ?2, ?2, 0, ?3, ?4) ON CONFLICT (key) DO NOTHING`),
		semLock: p(`
SELECT s.value, s.lim, s.blocked, s.duration_ms, s.expires_at,
	coalesce(k.lim, 0), coalesce(p.queue, ''), coalesce(p.max_active_per_key, 0), coalesce(p.max_blocked, 0)
FROM {p}semaphores s
LEFT JOIN {p}key_limits k ON k.key = s.key
LEFT JOIN {p}policies p ON p.queue = ?2
WHERE s.key = ?1`),
		// The transaction's write lock is the database's: nothing else
		// can hold the row.
		semTryLock: p(`SELECT 1 FROM {p}semaphores WHERE key = ?`),
		semSave: p(`UPDATE {p}semaphores SET value = ?, lim = ?, blocked = ?, duration_ms = ?, expires_at = ?
WHERE key = ?`),
		pickBlocked: p(`SELECT job_id FROM {p}blocked_executions WHERE concurrency_key = ?
ORDER BY priority DESC, job_id LIMIT ?`),
		promoteReady: p(`INSERT INTO {p}ready_executions (job_id, queue, priority, created_at)
SELECT job_id, queue, priority, ? FROM {p}blocked_executions WHERE job_id IN ` + idList + `
RETURNING job_id, queue`),
		deleteBlocked: p(`DELETE FROM {p}blocked_executions WHERE job_id IN ` + idList),
		countHolders: p(`
SELECT
	(SELECT count(*) FROM {p}jobs j JOIN {p}ready_executions r ON r.job_id = j.id
		WHERE j.concurrency_key = ?1 AND j.finished_at IS NULL)
	+ (SELECT count(*) FROM {p}jobs j JOIN {p}claimed_executions c ON c.job_id = j.id
		WHERE j.concurrency_key = ?1 AND j.finished_at IS NULL),
	(SELECT count(*) FROM {p}blocked_executions WHERE concurrency_key = ?1)`),

		hasDueScheduled: p(`SELECT EXISTS (SELECT 1 FROM {p}scheduled_executions WHERE scheduled_at <= ?)`),
		pickDueScheduled: p(`SELECT job_id FROM {p}scheduled_executions WHERE scheduled_at <= ?
ORDER BY scheduled_at, priority DESC, job_id LIMIT ?`),
		deleteScheduled: p(`DELETE FROM {p}scheduled_executions WHERE job_id IN ` + idList),
		selectJobs: p(`SELECT ` + jobColumns + ` FROM {p}jobs j WHERE j.id IN ` + idList +
			` ORDER BY j.priority DESC, j.id`),
		// Idle ones (every slot free, nothing blocked) have nothing to
		// reclaim: they are left to expire and be deleted.
		expiredSems: p(`SELECT key FROM {p}semaphores WHERE expires_at < ? AND (value < lim OR blocked > 0)
AND key > ? ORDER BY key LIMIT ?`),
		promotableSems: p(`SELECT key FROM {p}semaphores WHERE value > 0 AND blocked > 0 AND key > ?
ORDER BY key LIMIT ?`),
		deleteIdleSems: p(`
DELETE FROM {p}semaphores WHERE key IN (
	SELECT s.key FROM {p}semaphores s
	WHERE s.expires_at < ? AND s.value >= s.lim AND s.blocked = 0
		AND NOT EXISTS (SELECT 1 FROM {p}blocked_executions b WHERE b.concurrency_key = s.key)
	ORDER BY s.key LIMIT ?)`),
		// Dead processes by the database's record alone (args: now,
		// deadAfter): the driver then drops those whose beacon is fresh.
		deadProcesses: p(`
SELECT p.id, max(?2, p.dead_after_ms) FROM {p}processes p WHERE ` + deadFor(`max(?2, p.dead_after_ms)`)),
		// Claims of the processes listed (JSON) or of processes gone.
		claimsOfDead: p(`
SELECT ` + jobColumns + `, c.fence, c.claimed_at
FROM {p}claimed_executions c
JOIN {p}jobs j ON j.id = c.job_id
WHERE c.process_id IN ` + idList + `
	OR NOT EXISTS (SELECT 1 FROM {p}processes p WHERE p.id = c.process_id)
ORDER BY c.job_id LIMIT ?`),
		// Args: now, key, silence. Each row ends with its process id (0
		// when gone) and the silence that made it lost, for the beacon
		// check.
		lostClaimsOfKey: p(`
SELECT ` + jobColumns + `, c.fence, c.claimed_at, coalesce(p.id, 0),
	max(?3, j.concurrency_duration_ms, 3 * coalesce(p.heartbeat_interval_ms, 0))
FROM {p}jobs j
JOIN {p}claimed_executions c ON c.job_id = j.id
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE j.concurrency_key = ?2 AND j.finished_at IS NULL
	AND (p.id IS NULL OR (` + deadFor(`max(?3, j.concurrency_duration_ms, 3 * p.heartbeat_interval_ms)`) + `))
ORDER BY c.job_id`),
		deleteFinished: p(`DELETE FROM {p}jobs WHERE id IN (
	SELECT id FROM {p}jobs WHERE finished_at < ? ORDER BY finished_at LIMIT ?)`),

		registerProcess: p(`INSERT INTO {p}processes (kind, name, hostname, pid, queues, heartbeat_interval_ms,
	dead_after_ms, started_at, last_heartbeat_at, beating_since) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?8)
RETURNING id`),
		heartbeat:       p(`UPDATE {p}processes SET last_heartbeat_at = ?, beating_since = ? WHERE id = ?`),
		claimsOfProcess: p(`SELECT job_id, fence, claimed_at FROM {p}claimed_executions WHERE process_id = ?`),
		renewSems: p(`
UPDATE {p}semaphores SET expires_at = ?1 + duration_ms * 1000
WHERE expires_at < ?1 + duration_ms * 500 AND key IN (
	SELECT j.concurrency_key FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id
	WHERE c.process_id = ?2 AND j.concurrency_key IS NOT NULL)`),
		deregisterProcess: p(`DELETE FROM {p}processes WHERE id = ?`),
		deleteProcesses: p(`DELETE FROM {p}processes WHERE id IN ` + idList + `
AND NOT EXISTS (SELECT 1 FROM {p}claimed_executions c WHERE c.process_id = {p}processes.id)
RETURNING id`),
		listProcesses: p(`SELECT id, kind, name, hostname, pid, queues, heartbeat_interval_ms, dead_after_ms,
	started_at, last_heartbeat_at, beating_since FROM {p}processes ORDER BY id`),

		getJob: p(`
SELECT ` + jobColumns + `, coalesce(j.last_error, ''), j.finished_at,
	CASE
		WHEN EXISTS (SELECT 1 FROM {p}claimed_executions x WHERE x.job_id = j.id) THEN 'running'
		WHEN EXISTS (SELECT 1 FROM {p}ready_executions x WHERE x.job_id = j.id) THEN 'ready'
		WHEN EXISTS (SELECT 1 FROM {p}blocked_executions x WHERE x.job_id = j.id) THEN 'blocked'
		WHEN EXISTS (SELECT 1 FROM {p}scheduled_executions x WHERE x.job_id = j.id) THEN 'scheduled'
		WHEN EXISTS (SELECT 1 FROM {p}failed_executions x WHERE x.job_id = j.id) THEN 'failed'
		WHEN j.discarded THEN 'discarded'
		WHEN j.finished_at IS NOT NULL THEN 'completed'
		ELSE ''
	END
FROM {p}jobs j WHERE j.id = ?`),
		countByQueue: p(`
SELECT queue, sum(ready), sum(running), sum(scheduled), sum(blocked), sum(failed) FROM (
	SELECT queue, count(*) AS ready, 0 AS running, 0 AS scheduled, 0 AS blocked, 0 AS failed
		FROM {p}ready_executions GROUP BY queue
	UNION ALL SELECT j.queue, 0, count(*), 0, 0, 0
		FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id GROUP BY j.queue
	UNION ALL SELECT queue, 0, 0, count(*), 0, 0 FROM {p}scheduled_executions GROUP BY queue
	UNION ALL SELECT queue, 0, 0, 0, count(*), 0 FROM {p}blocked_executions GROUP BY queue
	UNION ALL SELECT queue, 0, 0, 0, 0, count(*) FROM {p}failed_executions GROUP BY queue
) t GROUP BY queue ORDER BY queue`),
		schemaVersion: p(`SELECT coalesce(max(version_id), 0) FROM {p}schema_migrations WHERE is_applied`),

		policyCap:    p(`SELECT coalesce(max(max_active), 0) FROM {p}policies WHERE queue = ?`),
		countClaimed: p(`SELECT count(*) FROM {p}claimed_executions WHERE queue = ?`),
		lockPolicies: p(`SELECT ` + policyColumns + ` FROM {p}policies
WHERE namespace = ? OR queue IN (SELECT value FROM json_each(?)) ORDER BY queue`),
		insertPolicy: p(`INSERT INTO {p}policies (queue, namespace, max_active, max_active_per_key, max_blocked,
	created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) ON CONFLICT (queue) DO NOTHING`),
		updatePolicy: p(`UPDATE {p}policies SET max_active = ?, max_active_per_key = ?, max_blocked = ?,
	updated_at = ? WHERE queue = ?`),
		deletePolicy: p(`DELETE FROM {p}policies WHERE queue = ?`),
		listPolicies: p(`SELECT ` + policyColumns + ` FROM {p}policies ORDER BY queue`),
		policyKeys: p(`SELECT DISTINCT concurrency_key FROM {p}jobs WHERE queue = ? AND concurrency_limit = 0
AND concurrency_key IS NOT NULL AND finished_at IS NULL ORDER BY 1`),
		setKeyLimit: p(`INSERT INTO {p}key_limits (key, lim, updated_at) VALUES (?, ?, ?)
ON CONFLICT (key) DO UPDATE SET lim = excluded.lim, updated_at = excluded.updated_at`),
		deleteKeyLimit: p(`DELETE FROM {p}key_limits WHERE key = ?`),
		latestJobLimit: p(`SELECT ` + jobColumns + ` FROM {p}jobs j
WHERE j.concurrency_key = ? AND j.finished_at IS NULL ORDER BY j.id DESC LIMIT 1`),

		// Inspection (read-only).
		readyAges: p(`SELECT queue, min(created_at) FROM {p}ready_executions GROUP BY queue ORDER BY queue`),
		groupStats: p(`
SELECT CASE WHEN instr(key, '/') > 0 THEN substr(key, 1, instr(key, '/') - 1) ELSE key END AS grp,
	count(*), min(lim), max(lim), sum(lim - value), sum(blocked), sum(CASE WHEN value <= 0 THEN 1 ELSE 0 END)
FROM {p}semaphores GROUP BY grp ORDER BY grp LIMIT ?`),
		topBlockedKeys: p(`SELECT key, value, lim, blocked, duration_ms, expires_at FROM {p}semaphores
WHERE blocked > 0 ORDER BY blocked DESC, key LIMIT ?`),
		readSem: p(`SELECT value, lim, blocked, duration_ms, expires_at FROM {p}semaphores WHERE key = ?`),
		keyHolders: p(`
SELECT j.id, j.kind, j.queue, c.job_id IS NOT NULL, coalesce(c.process_id, 0), coalesce(p.name, ''),
	p.last_heartbeat_at, c.claimed_at
FROM {p}jobs j
LEFT JOIN {p}claimed_executions c ON c.job_id = j.id
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE j.concurrency_key = ?1 AND j.finished_at IS NULL
	AND (c.job_id IS NOT NULL OR EXISTS (SELECT 1 FROM {p}ready_executions r WHERE r.job_id = j.id))
ORDER BY j.id LIMIT ?2`),
		blockedAhead: p(`SELECT count(*) FROM (SELECT 1 FROM {p}blocked_executions
WHERE concurrency_key = ? AND (priority > ? OR (priority = ? AND job_id < ?)) LIMIT ?)`),
		blockedLine: p(`
SELECT b.job_id, j.kind, b.queue, b.priority, b.created_at
FROM {p}blocked_executions b JOIN {p}jobs j ON j.id = b.job_id
WHERE b.concurrency_key = ? ORDER BY b.priority DESC, b.job_id LIMIT ?`),
		jobExecution: p(sqlinspect.JobExecutionSQL),
		listFailed:   p(sqlinspect.ListFailedSQL),
		deleteFailed: p(`DELETE FROM {p}failed_executions WHERE job_id = ?`),
	}
	q.inspect = sqlinspect.Queries{ReadyAges: q.readyAges, GroupStats: q.groupStats, TopBlockedKeys: q.topBlockedKeys,
		ReadSem: q.readSem, KeyHolders: q.keyHolders, BlockedAhead: q.blockedAhead, BlockedLine: q.blockedLine,
		JobExecution: q.jobExecution, ListFailed: q.listFailed}
	q.history = newHistoryQueries(p)
	return q
}
