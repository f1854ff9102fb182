package sqlite

import (
	"strconv"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/internal/sqltext"
)

// SQLite's statements, with the table prefix spliced in once; those both
// database/sql dialects spell alike are sqlexec.Common's. Times are Unix
// microseconds; id lists travel as JSON arrays read with json_each, so no
// statement is built from data. There are no row locks: the write
// transaction around a statement holds the database's one write lock.

// idList is how a statement reads its list: one JSON argument.
const idList = `(SELECT value FROM json_each(?))`

// inboxNow is the time now in Unix microseconds, as the inbox's
// created_at default reads it (migrations/sqlite/00014_inbox.sql).
const inboxNow = `CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)`

// rateLineKey is the line key (driver.RateLine) of rate row {t}: its
// blocked rows' concurrency key and its adaptive limit's key.
const rateLineKey = "'" + driver.RateLinePrefix + "' || {t}.rate_key"

// inRateLine is the condition that blocked row b waits in a rate line,
// where a job keeps the slots of its keys.
var inRateLine = "substr(b.concurrency_key, 1, " + strconv.Itoa(len(driver.RateLinePrefix)) + ") = '" + driver.RateLinePrefix + "'"

// readyKeyOf is the concurrency key a ready row of job id in queue
// carries (migration 00025): its job's key, empty for none, when the queue's
// policy has fair share, else NULL, which keeps the row out of ready_key.
func readyKeyOf(id, queue string) string {
	return `CASE WHEN EXISTS (SELECT 1 FROM {p}policies fp WHERE fp.queue = ` + queue + ` AND fp.fair_share)
	THEN coalesce((SELECT kj.concurrency_key FROM {p}jobs kj WHERE kj.id = ` + id + `), '') END`
}

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

// ownQueries are the statements of the steps SQLite takes its own way:
// set-wise completion and release (release.go), and dead processes that
// beacons may show alive (beacon.go, dialect.go).
type ownQueries struct {
	endClaims, finishJobs, withDependents, readSems, pickBlockedOfKeys, settleKeys, promoteReady string
	ensureSems, lockSems, saveSems, expireSems, tryLockSems, lineHeadsOfKeys                     string
	deadProcesses, claimsOfDead, lostClaimsOfKey, renewSems, deleteProcesses                     string
}

func newQueries(prefix string) (*sqlexec.Queries, *ownQueries) {
	p := sqltext.Spelling(prefix, sqlexec.ListMarker, idList)
	q := sqlexec.Common(p, sqlexec.KeySpelling{Column: "concurrency_key", JobKeysColumn: "key", InRateLine: inRateLine})

	q.InsertJobKeys = p(`INSERT INTO {p}job_keys (job_id, key) VALUES `)
	q.InsertReady = p(`INSERT INTO {p}ready_executions (job_id, queue, priority, created_at, concurrency_key)
SELECT v.column1, v.column2, v.column3, v.column4, ` + readyKeyOf("v.column1", "v.column2") + `
FROM (VALUES ` + sqlexec.RowsMarker + `) v`)
	// The inbox's times are Unix microseconds, of the host's clock as the
	// column's default reads it; the write transaction is the lock.
	q.Inbox = sqlexec.InboxStatements(p, sqlexec.InboxSpelling{
		KindIn: `kind IN ` + sqlexec.ListMarker,
		Now:    inboxNow,
		Before: `{col} < ` + inboxNow + ` - ? * 1000`,
	})
	q.PickReady = p(`SELECT job_id FROM {p}ready_executions WHERE queue = ?
	AND ` + sqltext.KeyNotPausedOf(`{p}ready_executions.job_id`) + `
ORDER BY priority DESC, job_id LIMIT ?`)
	q.PickAmong = p(sqlexec.AmongPick(idList, "", sqltext.KeyNotPausedOf))
	q.PickHandOff = p(sqlexec.HandOffPick(idList, "", sqltext.KeyNotPausedOf))
	q.DeleteReady = p(`DELETE FROM {p}ready_executions WHERE job_id IN ` + idList)
	q.InsertClaims = p(`INSERT INTO {p}claimed_executions (job_id, queue, process_id, claimed_at)
SELECT value, ?, ?, ? FROM json_each(?)`)
	q.DeleteJobs = p(`DELETE FROM {p}jobs WHERE id IN ` + idList)
	q.RunningSlots = p(`SELECT coalesce(sum(j.slots), 0) FROM {p}claimed_executions c
JOIN {p}jobs j ON j.id = c.job_id WHERE c.queue = ?`)

	q.SemEnsure = p(`INSERT INTO {p}semaphores (key, value, lim, blocked, duration_ms, expires_at)
VALUES (?, ?, ?, 0, ?, ?) ON CONFLICT (key) DO NOTHING`)
	q.SemLock = p(`SELECT ` + sqlexec.SemColumns("key", "?", "s.release_interval_us, s.last_release_at") + `
FROM {p}semaphores s WHERE s.key = ?`)
	// The transaction's write lock is the database's: nothing else can
	// hold the row.
	q.SemTryLock = p(`SELECT 1 FROM {p}semaphores WHERE key = ?`)
	q.SemSave = p(`UPDATE {p}semaphores SET value = ?, lim = ?, blocked = ?, multi = ?, duration_ms = ?, expires_at = ?,
	release_interval_us = CASE WHEN ? THEN ? ELSE release_interval_us END,
	last_release_at = CASE WHEN ? THEN ? ELSE last_release_at END
WHERE key = ?`)
	q.PickBlocked = p(`SELECT job_id, queue, priority FROM {p}blocked_executions WHERE concurrency_key = ?
ORDER BY priority DESC, job_id LIMIT ?`)
	q.DeleteBlocked = p(`DELETE FROM {p}blocked_executions WHERE job_id IN ` + idList)

	q.PickDueScheduled = p(`SELECT job_id FROM {p}scheduled_executions WHERE scheduled_at <= ?
ORDER BY scheduled_at, priority DESC, job_id LIMIT ?`)
	q.DeleteScheduled = p(`DELETE FROM {p}scheduled_executions WHERE job_id IN ` + idList)
	// Idle ones (every slot free, nothing blocked) have nothing to
	// reclaim: they are left to expire and be deleted.
	q.ExpiredSems = p(`SELECT key FROM {p}semaphores WHERE expires_at < ? AND (value < lim OR blocked > 0)
AND key > ? ORDER BY key LIMIT ?`)
	q.PromotableSems = p(`SELECT key FROM {p}semaphores WHERE value > 0 AND blocked > 0 AND key > ?
ORDER BY key LIMIT ?`)
	q.AllSems = p(`SELECT key FROM {p}semaphores WHERE key > ? ORDER BY key LIMIT ?`)
	// A semaphore a blocked multi-key job names is kept: that job's
	// promotion finds it.
	q.PickIdleSems = p(`SELECT s.key FROM {p}semaphores s
WHERE s.expires_at < ? AND s.value >= s.lim AND s.blocked = 0 AND s.multi = 0
	AND NOT EXISTS (SELECT 1 FROM {p}blocked_executions b WHERE b.concurrency_key = s.key)
	AND NOT EXISTS (SELECT 1 FROM {p}job_keys jk JOIN {p}blocked_executions b ON b.job_id = jk.job_id
		WHERE jk.key = s.key)
ORDER BY s.key LIMIT ?`)
	q.DeleteSems = p(`DELETE FROM {p}semaphores WHERE key IN ` + idList)
	q.DeleteFinished = p(`DELETE FROM {p}jobs WHERE id IN (
	SELECT id FROM {p}jobs WHERE finished_at < ? ORDER BY finished_at LIMIT ?)`)

	// Each key's first ?2 ready jobs of fair-share queue ?1
	// (KeyViewParams.PerKey): a recursive skip over the keys of ready_key
	// (migration 00025), then each key's first jobs from the same index,
	// so the read costs the keys and the jobs taken, not the line. SQLite
	// has no LATERAL: the key's jobs are an IN list cut at ?2. The
	// terms on concurrency_key imply its IS NOT NULL, so the partial index
	// serves them. A paused key is passed over whole; a job paused by a
	// further key of its own is left out as in ReadyByKey.
	q.ReadyPerKey = p(`
WITH RECURSIVE keys(k) AS (
	SELECT (SELECT concurrency_key FROM {p}ready_executions WHERE queue = ?1 AND concurrency_key IS NOT NULL
		ORDER BY concurrency_key LIMIT 1)
	UNION ALL
	SELECT (SELECT r.concurrency_key FROM {p}ready_executions r WHERE r.queue = ?1 AND r.concurrency_key > keys.k
		ORDER BY r.concurrency_key LIMIT 1)
	FROM keys WHERE keys.k IS NOT NULL
)
SELECT 0, x.concurrency_key, x.job_id, j.slots,
	CASE WHEN ` + sqltext.MaxWeight + ` > 0 THEN coalesce((SELECT w.weight FROM {p}key_weights w WHERE w.key = x.concurrency_key), 0) ELSE 0 END,
	` + sqltext.MaxWeight + `, x.priority
FROM keys JOIN {p}ready_executions x ON x.job_id IN (
	SELECT r.job_id FROM {p}ready_executions r
	WHERE r.queue = ?1 AND r.concurrency_key = keys.k AND ` + sqltext.KeyNotPausedOf(`r.job_id`) + `
	ORDER BY r.priority DESC, r.job_id LIMIT ?2)
JOIN {p}jobs j ON j.id = x.job_id
WHERE keys.k IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM {p}paused_keys pk WHERE pk.key = keys.k)
UNION ALL
` + sqltext.RunningByKey + `
ORDER BY 1, 7 DESC, 3`)
	q.CountByQueue = p(sqltext.CountByQueue(func(col string) string { return "sum(" + col + ")" }))
	// The policies, pauses and key overrides are sqlexec's shared
	// statements: PolicyLockMany reads, the write transaction is the lock.

	// Rates: no row locks, the write transaction is the lock, so TryLock
	// is Lock.
	q.Rate = sqlexec.Rates(p, sqlexec.RateSpelling{
		KeyColumns: "rate_key",
		Ignore:     " ON CONFLICT (rate_key) DO NOTHING",
		Upsert: " ON CONFLICT (rate_key) DO UPDATE SET lim = excluded.lim, period_ms = excluded.period_ms," +
			" updated_at = excluded.updated_at",
		Group:   "substr(rate_key, 1, instr(rate_key, '/') - 1)",
		LineOf:  "b.concurrency_key = " + rateLineKey,
		AdaptOf: "a.key = " + rateLineKey,
	})

	// Inspection (read-only).
	q.GroupStats = p(`
SELECT CASE WHEN instr(key, '/') > 0 THEN substr(key, 1, instr(key, '/') - 1) ELSE key END AS grp,
	count(*), min(lim), max(lim), sum(lim - value), sum(blocked), sum(CASE WHEN value <= 0 THEN 1 ELSE 0 END)
FROM {p}semaphores GROUP BY grp ORDER BY grp LIMIT ?`)
	q.KeyHolders = p(`
SELECT j.id, j.kind, j.queue, c.job_id IS NOT NULL, coalesce(c.process_id, 0), coalesce(p.name, ''),
	p.last_heartbeat_at, c.claimed_at, ` + sqltext.HeldColumn + `
FROM {p}jobs j
LEFT JOIN {p}claimed_executions c ON c.job_id = j.id
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE j.id IN (SELECT x.id FROM {p}jobs x WHERE x.concurrency_key = ? AND x.finished_at IS NULL
		UNION SELECT k.job_id FROM {p}job_keys k WHERE k.key = ?)
	AND j.finished_at IS NULL
	AND (c.job_id IS NOT NULL OR EXISTS (SELECT 1 FROM {p}ready_executions r WHERE r.job_id = j.id)
		OR ` + sqltext.HeldSlot + `)
ORDER BY j.id LIMIT ?`)

	own := &ownQueries{
		// Set-wise completion: the claims named by (job id, fence) pairs.
		endClaims: p(`DELETE FROM {p}claimed_executions
WHERE (fence, job_id) IN (SELECT value->>1, value->>0 FROM json_each(?))
RETURNING job_id, fence`),
		finishJobs: p(`UPDATE {p}jobs SET attempt = attempt + 1, finished_at = ? WHERE id IN ` + idList),
		// The ended jobs others wait for (DependsOn): their edges are
		// taken in the same transaction.
		withDependents: p(`SELECT id FROM {p}jobs WHERE has_dependents AND id IN ` + idList),
		// Set-wise release reads the keys' semaphores, computes release
		// and promotion in Go, and writes each row once (settleKeys).
		readSems: p(`SELECT key, value, lim, blocked, multi, duration_ms, expires_at, release_interval_us, last_release_at FROM {p}semaphores
WHERE key IN ` + idList),
		// The head of each key's line (a JSON array of keys), at most ?2
		// per key, as (position in the array, job): SQLite has no LATERAL
		// and no correlated LIMIT, so the caller trims each key to its
		// count. Each key's scan reads only the head of its index.
		pickBlockedOfKeys: p(`
SELECT t.key, b.job_id, b.queue, b.priority FROM json_each(?1) t
JOIN {p}blocked_executions b ON b.job_id IN (
	SELECT x.job_id FROM {p}blocked_executions x WHERE x.concurrency_key = t.value
	ORDER BY x.priority DESC, x.job_id LIMIT ?2)
ORDER BY t.key, b.priority DESC, b.job_id`),
		// pickBlockedOfKeys with LineListHeads' columns.
		lineHeadsOfKeys: p(`
SELECT t.key, b.job_id, b.queue, b.priority, coalesce(j.concurrency_key, ''), j.concurrency_limit,
	j.concurrency_duration_ms, j.on_conflict, j.max_blocked, j.more_keys, j.slots
FROM json_each(?1) t
JOIN {p}blocked_executions b ON b.job_id IN (
	SELECT x.job_id FROM {p}blocked_executions x WHERE x.concurrency_key = t.value
	ORDER BY x.priority DESC, x.job_id LIMIT ?2)
JOIN {p}jobs j ON j.id = b.job_id
ORDER BY t.key, b.priority DESC, b.job_id`),
		// Rows of (key, free slots, blocked left, release interval,
		// last release), as saveSems takes them. It leaves expires_at, and
		// so the expiry index, alone: renewals go through expireSems.
		settleKeys: p(`UPDATE {p}semaphores SET value = r.column2, blocked = r.column3,
	release_interval_us = r.column4, last_release_at = r.column5
FROM (VALUES ` + sqlexec.RowsMarker + `) r WHERE {p}semaphores.key = r.column1`),
		promoteReady: p(`INSERT INTO {p}ready_executions (job_id, queue, priority, created_at, concurrency_key)
SELECT b.job_id, b.queue, b.priority, ?, ` + readyKeyOf("b.job_id", "b.queue") + `
FROM {p}blocked_executions b WHERE b.job_id IN ` + idList + `
RETURNING job_id`),

		// Set-wise admission: lockSems reads the semaphores of a JSON
		// array of [key, queue] with their override and their queue's
		// policy, and ensureSems creates those it did not find ([key,
		// limit, duration_ms, expires_at]; WHERE true parses ON CONFLICT
		// as the upsert's), each one text for any number of keys.
		// saveSems ([key, value, lim, blocked, multi, duration_ms]) and
		// expireSems ([key, expires_at]) write them back from bound
		// VALUES rows (cheaper than JSON to read, and cut into the
		// dialect's few Batch sizes, so a handful of texts stay
		// prepared), expireSems only the rows whose expiry changed, so
		// the expiry index is touched only for those.
		ensureSems: p(`INSERT INTO {p}semaphores (key, value, lim, blocked, duration_ms, expires_at)
SELECT value->>0, value->>1, value->>1, 0, value->>2, value->>3 FROM json_each(?) WHERE true
ON CONFLICT (key) DO NOTHING`),
		lockSems: p(`
SELECT t.key, s.value, s.lim, s.blocked, s.multi, s.duration_ms, s.expires_at, s.release_interval_us, coalesce(k.lim, 0), coalesce((SELECT a.lim FROM {p}key_adapt a WHERE a.key = s.key), 0),
	coalesce(p.queue, ''), coalesce(p.max_active_per_key, 0), coalesce(p.max_blocked, 0),
	coalesce(p.max_wait_us, 0), coalesce(p.adaptive_min, 0)
FROM json_each(?) t
JOIN {p}semaphores s ON s.key = t.value->>0
LEFT JOIN {p}key_limits k ON k.key = s.key
LEFT JOIN {p}policies p ON p.queue = t.value->>1
ORDER BY t.key`),
		saveSems: p(`UPDATE {p}semaphores SET value = r.column2, lim = r.column3, blocked = r.column4, multi = r.column5,
	duration_ms = r.column6
FROM (VALUES ` + sqlexec.RowsMarker + `) r WHERE {p}semaphores.key = r.column1`),
		expireSems: p(`UPDATE {p}semaphores SET expires_at = r.column2
FROM (VALUES ` + sqlexec.RowsMarker + `) r WHERE {p}semaphores.key = r.column1 AND {p}semaphores.expires_at <> r.column2`),
		// The try-lock of a key list (JSON): the write transaction is the
		// lock, so it reads.
		tryLockSems: p(`
SELECT t.key, s.value, s.lim, s.blocked, s.multi, s.duration_ms, s.expires_at
FROM json_each(?) t JOIN {p}semaphores s ON s.key = t.value ORDER BY t.key`),

		// Dead processes by the database's record alone (args: now,
		// deadAfter): the driver then drops those whose beacon is fresh.
		deadProcesses: p(`
SELECT p.id, max(?2, p.dead_after_ms) FROM {p}processes p WHERE ` + deadFor(`max(?2, p.dead_after_ms)`)),
		// Claims of the processes listed (JSON) or of processes gone.
		claimsOfDead: p(`
SELECT ` + sqltext.JobColumns + `, c.fence, c.claimed_at
FROM {p}claimed_executions c
JOIN {p}jobs j ON j.id = c.job_id
WHERE c.process_id IN ` + idList + `
	OR NOT EXISTS (SELECT 1 FROM {p}processes p WHERE p.id = c.process_id)
ORDER BY c.job_id LIMIT ?`),
		// Args: now, key, silence. Each row ends with its process id (0
		// when gone) and the silence that made it lost, for the beacon
		// check.
		lostClaimsOfKey: p(`
SELECT ` + sqltext.JobColumns + `, c.fence, c.claimed_at, coalesce(p.id, 0),
	max(?3, j.concurrency_duration_ms, 3 * coalesce(p.heartbeat_interval_ms, 0))
FROM {p}jobs j
JOIN {p}claimed_executions c ON c.job_id = j.id
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE j.id IN (SELECT x.id FROM {p}jobs x WHERE x.concurrency_key = ?2 AND x.finished_at IS NULL
		UNION SELECT k.job_id FROM {p}job_keys k WHERE k.key = ?2)
	AND j.finished_at IS NULL
	AND (p.id IS NULL OR (` + deadFor(`max(?3, j.concurrency_duration_ms, 3 * p.heartbeat_interval_ms)`) + `))
ORDER BY c.job_id`),
		renewSems: p(`
UPDATE {p}semaphores SET expires_at = ?1 + duration_ms * 1000
WHERE expires_at < ?1 + duration_ms * 1000 * ?3 AND key IN (
	SELECT j.concurrency_key FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id
	WHERE c.process_id = ?2 AND j.concurrency_key IS NOT NULL
	UNION SELECT k.key FROM {p}claimed_executions c JOIN {p}job_keys k ON k.job_id = c.job_id
	WHERE c.process_id = ?2)`),
		deleteProcesses: p(`DELETE FROM {p}processes WHERE id IN ` + idList + `
AND NOT EXISTS (SELECT 1 FROM {p}claimed_executions c WHERE c.process_id = {p}processes.id)
RETURNING id`),
	}
	return &q, own
}
