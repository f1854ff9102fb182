package mysql

import (
	"strconv"
	"strings"

	"github.com/bqueue/bq/internal/sqlinspect"
)

// queries holds every statement with the table prefix spliced in once.
//
// MySQL has no RETURNING and no data-modifying CTEs, so what PostgreSQL
// does in one statement takes several here, inside one transaction: pick
// rows with a locking read (FOR UPDATE SKIP LOCKED where PostgreSQL
// skips), then change exactly the rows picked, by primary key. Id lists
// are spliced in as "?, ?, ..." placeholders (see in), never as data.
//
// Keys travel as []byte and are looked up by their SHA-256 (hash(key)),
// which is what the indexes hold. FORCE INDEX pins the plan where another
// one would make a locking read lock rows it does not return.
// deadFor is the condition that process p (the row, aliased p) is dead at
// the first argument, now, after a silence of the expression silenceMS
// (which takes its arguments twice): it has been silent that long, and
// another process's heartbeats landed without a gap for as long within
// that silence, so the database was writable and the silence is p's own
// (driver package doc, "Dead processes").
func deadFor(silenceMS string) string {
	return `p.last_heartbeat_at < ? - ` + silenceMS + ` * 1000
	AND EXISTS (SELECT 1 FROM {p}processes q WHERE q.id <> p.id
		AND q.last_heartbeat_at - greatest(p.last_heartbeat_at, q.beating_since) > ` + silenceMS + ` * 1000)`
}

type queries struct {
	insertJob, insertReady, insertScheduled, insertBlocked string

	pickReady, deleteReady, insertClaims, selectClaims            string
	deleteClaim, finishJob, deleteJobs, recordError, insertFailed string

	semEnsure, semLock, semTryLock, semSave, pickBlocked, deleteBlocked, countHolders string

	hasDueScheduled, pickDueScheduled, deleteScheduled, selectJobs string
	expiredSems, promotableSems, pickIdleSems, deleteSems          string
	lostClaims, lostClaimsOfKey, lockClaims, selectLockedClaims    string
	deleteFinished                                                 string

	registerProcess, heartbeat, processExists, heldKeys, pickRenewable, renewSems   string
	deregisterProcess, deadProcesses, lockProcesses, deleteProcesses, listProcesses string
	claimsOfProcess                                                                 string

	getJob, countByQueue, schemaVersion string

	lockCap, countClaimed                                                            string
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

// list marks where a statement takes an id list; in() expands it.
const list = "(/*list*/)"

// byKey follows the id list of a statement that changes rows, after an
// ORDER BY of the table's primary key: in expands it into LIMIT n. Without
// it InnoDB may plan a small table's `WHERE id IN (...)` as a full scan,
// which waits on every row another transaction holds — a caller's open
// transaction that enqueued a ready job would stall every claim of the
// queue. Ordered by the primary key and limited, the statement reads the
// rows it names by the key, and only those.
const byKey = " /*limit*/"

// in expands a statement's id list into n placeholders (and byKey into
// LIMIT n).
func in(query string, n int) string {
	query = strings.Replace(query, byKey, " LIMIT "+strconv.Itoa(n), 1)
	return strings.Replace(query, list, "("+strings.TrimSuffix(strings.Repeat("?, ", n), ", ")+")", 1)
}

// values returns n rows of a multi-row VALUES list, each of width
// placeholders.
func values(n, width int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", width), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

func newQueries(prefix string) *queries {
	p := func(s string) string { return strings.ReplaceAll(s, "{p}", prefix) }
	q := &queries{
		insertJob: p(`INSERT INTO {p}jobs (kind, queue, args, priority, max_attempts, concurrency_key,
	concurrency_limit, concurrency_duration_ms, on_conflict, max_blocked, scheduled_at, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		// Followed by values(n, width).
		insertReady:     p(`INSERT INTO {p}ready_executions (job_id, queue, priority, created_at) VALUES `),
		insertScheduled: p(`INSERT INTO {p}scheduled_executions (job_id, queue, priority, scheduled_at) VALUES `),
		insertBlocked:   p(`INSERT INTO {p}blocked_executions (job_id, queue, priority, concurrency_key, created_at) VALUES `),

		// The index matches the ORDER BY, so the scan stops after the rows
		// it returns and locks no others.
		pickReady: p(`SELECT job_id FROM {p}ready_executions FORCE INDEX ({p}ready_poll)
WHERE queue = ? ORDER BY priority DESC, job_id LIMIT ? FOR UPDATE SKIP LOCKED`),
		deleteReady:  p(`DELETE FROM {p}ready_executions WHERE job_id IN ` + list + ` ORDER BY job_id` + byKey),
		insertClaims: p(`INSERT INTO {p}claimed_executions (job_id, queue, process_id, claimed_at) VALUES `),
		selectClaims: p(`SELECT ` + jobColumns + `, c.fence, c.claimed_at
FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id
WHERE c.job_id IN ` + list + ` ORDER BY j.priority DESC, j.id`),
		deleteClaim: p(`DELETE FROM {p}claimed_executions WHERE fence = ? AND job_id = ?`),
		finishJob:   p(`UPDATE {p}jobs SET attempt = attempt + ?, finished_at = ?, discarded = ? WHERE id = ?`),
		deleteJobs:  p(`DELETE FROM {p}jobs WHERE id IN ` + list + ` ORDER BY id` + byKey),
		recordError: p(`UPDATE {p}jobs SET attempt = attempt + 1, last_error = ? WHERE id = ?`),
		insertFailed: p(`INSERT INTO {p}failed_executions (job_id, queue, error, failed_at)
SELECT id, queue, ?, ? FROM {p}jobs WHERE id = ?`),

		// Never a plain INSERT caught on its duplicate-key error: that
		// leaves a shared lock on the row, and two transactions upgrading
		// theirs to lock it deadlock. ON DUPLICATE KEY UPDATE takes the
		// exclusive lock at once.
		semEnsure: p("INSERT INTO {p}semaphores (key_hash, `key`, value, lim, blocked, duration_ms, expires_at)\n" +
			"VALUES (?, ?, ?, ?, 0, ?, ?) ON DUPLICATE KEY UPDATE `key` = `key`"),
		// The override and the policy come from subqueries, which a
		// locking read does not lock: only the semaphore row is locked.
		semLock: p(`SELECT s.value, s.lim, s.blocked, s.duration_ms, s.expires_at,
	coalesce((SELECT k.lim FROM {p}key_limits k WHERE k.key_hash = s.key_hash), 0),
	coalesce((SELECT p.queue FROM {p}policies p WHERE p.queue = ?), ''),
	coalesce((SELECT p.max_active_per_key FROM {p}policies p WHERE p.queue = ?), 0),
	coalesce((SELECT p.max_blocked FROM {p}policies p WHERE p.queue = ?), 0)
FROM {p}semaphores s WHERE s.key_hash = ? AND s.` + "`key`" + ` = ? FOR UPDATE`),
		semTryLock: p(`SELECT 1 FROM {p}semaphores WHERE key_hash = ? AND ` + "`key`" + ` = ? FOR UPDATE SKIP LOCKED`),
		semSave: p(`UPDATE {p}semaphores SET value = ?, lim = ?, blocked = ?, duration_ms = ?, expires_at = ?
WHERE key_hash = ?`),
		// Callers hold the key's semaphore lock, which every writer of
		// the key's blocked rows takes first: a plain read is stable.
		pickBlocked: p(`SELECT job_id, queue, priority FROM {p}blocked_executions FORCE INDEX ({p}blocked_line)
WHERE concurrency_key_hash = ? ORDER BY priority DESC, job_id LIMIT ?`),
		deleteBlocked: p(`DELETE FROM {p}blocked_executions WHERE job_id IN ` + list + ` ORDER BY job_id` + byKey),
		countHolders: p(`
SELECT
	(SELECT count(*) FROM {p}jobs j FORCE INDEX ({p}jobs_live_key) JOIN {p}ready_executions r ON r.job_id = j.id
		WHERE j.concurrency_key_hash = ? AND j.finished_at IS NULL)
	+ (SELECT count(*) FROM {p}jobs j FORCE INDEX ({p}jobs_live_key) JOIN {p}claimed_executions c ON c.job_id = j.id
		WHERE j.concurrency_key_hash = ? AND j.finished_at IS NULL),
	(SELECT count(*) FROM {p}blocked_executions FORCE INDEX ({p}blocked_line) WHERE concurrency_key_hash = ?)`),

		hasDueScheduled: p(`SELECT EXISTS (SELECT 1 FROM {p}scheduled_executions WHERE scheduled_at <= ?)`),
		pickDueScheduled: p(`SELECT job_id FROM {p}scheduled_executions FORCE INDEX ({p}scheduled_due)
WHERE scheduled_at <= ? ORDER BY scheduled_at, priority DESC, job_id LIMIT ? FOR UPDATE SKIP LOCKED`),
		deleteScheduled: p(`DELETE FROM {p}scheduled_executions WHERE job_id IN ` + list + ` ORDER BY job_id` + byKey),
		selectJobs: p(`SELECT ` + jobColumns + ` FROM {p}jobs j WHERE j.id IN ` + list +
			` ORDER BY j.priority DESC, j.id`),
		// Idle ones (every slot free, nothing blocked) have nothing to
		// reclaim: they are left to expire and be deleted.
		expiredSems: p("SELECT `key` FROM {p}semaphores WHERE expires_at < ? AND (value < lim OR blocked > 0)\n" +
			"AND `key` > ? ORDER BY `key` LIMIT ?"),
		promotableSems: p("SELECT `key` FROM {p}semaphores WHERE value > 0 AND blocked > 0 AND `key` > ?\n" +
			"ORDER BY `key` LIMIT ?"),
		// In expiry order, the index's: the scan stops after the rows it
		// returns. A locking read sees the rows' latest values, so what it
		// locks is idle now and stays so until the delete.
		pickIdleSems: p(`SELECT s.key_hash FROM {p}semaphores s FORCE INDEX ({p}semaphores_expires)
WHERE s.expires_at < ? AND s.value >= s.lim AND s.blocked = 0
	AND NOT EXISTS (SELECT 1 FROM {p}blocked_executions b WHERE b.concurrency_key_hash = s.key_hash)
ORDER BY s.expires_at LIMIT ? FOR UPDATE SKIP LOCKED`),
		deleteSems: p(`DELETE FROM {p}semaphores WHERE key_hash IN ` + list + ` ORDER BY key_hash` + byKey),

		// Lost claims are found by a plain read joining jobs and
		// processes, then locked by fence alone (lockClaims): PostgreSQL's
		// FOR UPDATE OF c, which MariaDB lacks, locks only the claims too.
		// A fence names one claim, so a claim finished or claimed again in
		// between is not locked.
		// Args: now, deadAfter, deadAfter (deadFor), max.
		lostClaims: p(`SELECT c.fence FROM {p}claimed_executions c
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE p.id IS NULL OR (` + deadFor(`greatest(?, p.dead_after_ms)`) + `)
ORDER BY c.job_id LIMIT ?`),
		// Args: key hash, now, silence, silence.
		lostClaimsOfKey: p(`SELECT c.fence FROM {p}jobs j FORCE INDEX ({p}jobs_live_key)
JOIN {p}claimed_executions c ON c.job_id = j.id
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE j.concurrency_key_hash = ? AND j.finished_at IS NULL
	AND (p.id IS NULL OR (` + deadFor(`greatest(?, j.concurrency_duration_ms, 3 * p.heartbeat_interval_ms)`) + `))
ORDER BY c.job_id`),
		lockClaims: p(`SELECT fence FROM {p}claimed_executions WHERE fence IN ` + list + `
ORDER BY fence FOR UPDATE SKIP LOCKED`),
		selectLockedClaims: p(`SELECT ` + jobColumns + `, c.fence, c.claimed_at
FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id
WHERE c.fence IN ` + list + ` ORDER BY c.job_id`),
		deleteFinished: p(`DELETE FROM {p}jobs WHERE finished_at < ? ORDER BY finished_at LIMIT ?`),

		registerProcess: p(`INSERT INTO {p}processes (kind, name, hostname, pid, queues, heartbeat_interval_ms,
	dead_after_ms, started_at, last_heartbeat_at, beating_since) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		heartbeat:       p(`UPDATE {p}processes SET last_heartbeat_at = ?, beating_since = ? WHERE id = ?`),
		claimsOfProcess: p(`SELECT job_id, fence, claimed_at FROM {p}claimed_executions WHERE process_id = ?`),
		processExists:   p(`SELECT EXISTS (SELECT 1 FROM {p}processes WHERE id = ?)`),
		// Renewal reads the keys the process's claims hold, then locks
		// their semaphores that expire within half their duration,
		// skipping rows someone holds: two renewals never wait on each
		// other, and a skipped key is renewed next beat.
		heldKeys: p(`SELECT DISTINCT j.concurrency_key_hash FROM {p}claimed_executions c
JOIN {p}jobs j ON j.id = c.job_id
WHERE c.process_id = ? AND j.concurrency_key_hash IS NOT NULL`),
		pickRenewable: p(`SELECT key_hash FROM {p}semaphores
WHERE key_hash IN ` + list + ` AND expires_at < ? + duration_ms * 500
ORDER BY key_hash FOR UPDATE SKIP LOCKED`),
		renewSems: p(`UPDATE {p}semaphores SET expires_at = ? + duration_ms * 1000 WHERE key_hash IN ` + list +
			` ORDER BY key_hash` + byKey),
		deregisterProcess: p(`DELETE FROM {p}processes WHERE id = ?`),
		// Dead processes are found by a plain read (args: now, deadAfter,
		// deadAfter), locked skipping rows others hold, and deleted only
		// if they have not beaten since (lockProcesses reads the latest
		// beat) and still hold no claim.
		deadProcesses: p(`SELECT p.id, p.last_heartbeat_at FROM {p}processes p
WHERE ` + deadFor(`greatest(?, p.dead_after_ms)`) + `
	AND NOT EXISTS (SELECT 1 FROM {p}claimed_executions c WHERE c.process_id = p.id)`),
		lockProcesses: p(`SELECT id, last_heartbeat_at FROM {p}processes WHERE id IN ` + list + `
ORDER BY id FOR UPDATE SKIP LOCKED`),
		deleteProcesses: p(`DELETE FROM {p}processes WHERE id IN ` + list + `
AND NOT EXISTS (SELECT 1 FROM {p}claimed_executions c WHERE c.process_id = {p}processes.id) ORDER BY id` + byKey),
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
SELECT queue, CAST(sum(ready) AS SIGNED), CAST(sum(running) AS SIGNED), CAST(sum(scheduled) AS SIGNED),
	CAST(sum(blocked) AS SIGNED), CAST(sum(failed) AS SIGNED) FROM (
	SELECT queue, count(*) AS ready, 0 AS running, 0 AS scheduled, 0 AS blocked, 0 AS failed
		FROM {p}ready_executions GROUP BY queue
	UNION ALL SELECT j.queue, 0, count(*), 0, 0, 0
		FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id GROUP BY j.queue
	UNION ALL SELECT queue, 0, 0, count(*), 0, 0 FROM {p}scheduled_executions GROUP BY queue
	UNION ALL SELECT queue, 0, 0, 0, count(*), 0 FROM {p}blocked_executions GROUP BY queue
	UNION ALL SELECT queue, 0, 0, 0, 0, count(*) FROM {p}failed_executions GROUP BY queue
) t GROUP BY queue ORDER BY queue`),
		schemaVersion: p(`SELECT coalesce(max(version_id), 0) FROM {p}schema_migrations WHERE is_applied`),

		// Claimers of a capped queue take turns on its policy row, then
		// count its claims in a statement of their own, after the lock.
		lockCap:      p(`SELECT max_active FROM {p}policies WHERE queue = ? AND max_active > 0 FOR UPDATE`),
		countClaimed: p(`SELECT count(*) FROM {p}claimed_executions FORCE INDEX ({p}claimed_queue) WHERE queue = ?`),
		lockPolicies: p(`SELECT ` + policyColumns + ` FROM {p}policies
WHERE namespace = ? OR queue IN ` + list + ` ORDER BY queue FOR UPDATE`),
		insertPolicy: p(`INSERT INTO {p}policies (queue, namespace, max_active, max_active_per_key, max_blocked,
	created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE queue = queue`),
		updatePolicy: p(`UPDATE {p}policies SET max_active = ?, max_active_per_key = ?, max_blocked = ?,
	updated_at = ? WHERE queue = ?`),
		deletePolicy: p(`DELETE FROM {p}policies WHERE queue = ?`),
		listPolicies: p(`SELECT ` + policyColumns + ` FROM {p}policies ORDER BY queue`),
		policyKeys: p(`SELECT DISTINCT concurrency_key FROM {p}jobs WHERE queue = ? AND concurrency_limit = 0
AND concurrency_key IS NOT NULL AND finished_at IS NULL ORDER BY 1`),
		setKeyLimit: p("INSERT INTO {p}key_limits (key_hash, `key`, lim, updated_at) VALUES (?, ?, ?, ?)\n" +
			"ON DUPLICATE KEY UPDATE lim = VALUES(lim), updated_at = VALUES(updated_at)"),
		deleteKeyLimit: p("DELETE FROM {p}key_limits WHERE key_hash = ? AND `key` = ?"),
		latestJobLimit: p(`SELECT ` + jobColumns + ` FROM {p}jobs j FORCE INDEX ({p}jobs_live_key)
WHERE j.concurrency_key_hash = ? AND j.finished_at IS NULL ORDER BY j.id DESC LIMIT 1`),

		// Inspection (read-only).
		readyAges: p(`SELECT queue, min(created_at) FROM {p}ready_executions GROUP BY queue ORDER BY queue`),
		groupStats: p("SELECT SUBSTRING_INDEX(`key`, '/', 1) AS grp, count(*), min(lim), max(lim),\n" +
			"CAST(sum(lim - value) AS SIGNED), CAST(sum(blocked) AS SIGNED),\n" +
			"CAST(sum(CASE WHEN value <= 0 THEN 1 ELSE 0 END) AS SIGNED)\n" +
			"FROM {p}semaphores GROUP BY grp ORDER BY grp LIMIT ?"),
		topBlockedKeys: p("SELECT `key`, value, lim, blocked, duration_ms, expires_at FROM {p}semaphores\n" +
			"WHERE blocked > 0 ORDER BY blocked DESC, `key` LIMIT ?"),
		readSem: p("SELECT value, lim, blocked, duration_ms, expires_at FROM {p}semaphores WHERE key_hash = ? AND `key` = ?"),
		keyHolders: p(`
SELECT j.id, j.kind, j.queue, c.job_id IS NOT NULL, coalesce(c.process_id, 0), coalesce(p.name, ''),
	p.last_heartbeat_at, c.claimed_at
FROM {p}jobs j FORCE INDEX ({p}jobs_live_key)
LEFT JOIN {p}claimed_executions c ON c.job_id = j.id
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE j.concurrency_key_hash = ? AND j.concurrency_key = ? AND j.finished_at IS NULL
	AND (c.job_id IS NOT NULL OR EXISTS (SELECT 1 FROM {p}ready_executions r WHERE r.job_id = j.id))
ORDER BY j.id LIMIT ?`),
		blockedAhead: p(`SELECT count(*) FROM (SELECT 1 FROM {p}blocked_executions FORCE INDEX ({p}blocked_line)
WHERE concurrency_key_hash = ? AND concurrency_key = ? AND (priority > ? OR (priority = ? AND job_id < ?)) LIMIT ?) ahead`),
		blockedLine: p(`
SELECT b.job_id, j.kind, b.queue, b.priority, b.created_at
FROM {p}blocked_executions b FORCE INDEX ({p}blocked_line) JOIN {p}jobs j ON j.id = b.job_id
WHERE b.concurrency_key_hash = ? AND b.concurrency_key = ? ORDER BY b.priority DESC, b.job_id LIMIT ?`),
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
