package postgres

import (
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/internal/sqltext"
)

// queries holds every statement with the table prefix spliced in once.
type queries struct {
	// SharedQueries are those of sqlexec.Shared (shared.go).
	sqlexec.SharedQueries

	insertJobs, insertPlainJobs, insertKeyedJobs, insertReady, insertScheduled, insertBlocked string // lean: leanInsertJobs

	completeClaims, completeDelete                                            string
	claimReady, deleteClaim, finishJob, deleteJobs, recordError, insertFailed string

	semEnsure, semLock, semTryLock, semSave, promoteBlocked, countHolders string
	lineHeads, moveToLine                                                 string
	lineHeadsMany, semTryLockMany, promoteFirst                           string
	lockSems, lockFirstSem, releasePromote                                string
	semEnsureMany, semReadMany, semSaveMany                               string

	hasDueScheduled, takeDueScheduled, expiredSems, promotableSems, deleteIdleSems string
	lostClaims, lostClaimsOfKey, deleteFinished                                    string

	heartbeat, renewSems, deleteDeadProcesses string

	claimUncapped, queueGate, lockQueueGate, countClaimed, hasReady string
	policyKeys, latestJobLimit                                      string

	// cancel.go
	cancelJob, markCancel string

	history historyQueries // history.go
	unique  uniqueQueries  // unique.go
	rate    rateQueries    // rate.go

	// spell splices the prefix into statements built at run time (list.go).
	spell func(string) string
}

const (
	jobColumns = sqltext.JobColumns
	// deleteHotRows follows a CTE gone(id) of deleted jobs: it deletes
	// their ready, claimed and blocked rows, which have no foreign key.
	deleteHotRows = `, r AS (DELETE FROM {p}ready_executions x USING gone WHERE x.job_id = gone.id)
, c AS (DELETE FROM {p}claimed_executions x USING gone WHERE x.job_id = gone.id)
, b AS (DELETE FROM {p}blocked_executions x USING gone WHERE x.job_id = gone.id)`
)

// movePicked follows a CTE picked(job_id) of blocked jobs: it moves
// them to ready (created at the parameter now) as moved(job_id,
// queue, priority, concurrency_key), the promotion of every
// statement that promotes.
func movePicked(now string) string {
	return `, moved AS (
	DELETE FROM {p}blocked_executions b USING picked WHERE b.job_id = picked.job_id
	RETURNING b.job_id, b.queue, b.priority, b.concurrency_key
), ins AS (
	INSERT INTO {p}ready_executions (job_id, queue, priority, created_at)
	SELECT job_id, queue, priority, ` + now + ` FROM moved
)`
}

// claimFrom is the claim of up to $2 ready jobs of queue $1 for process $3
// at $4; guard filters the ready rows. Each row is taken by its key (=
// ANY of an array), never by a join: its plan is then the same whatever
// the LIMIT, so the one-statement claim can run its generic plan
// (collectGeneric), where a join would be planned to hash a tenth of the
// ready table.
func claimFrom(guard string) string {
	return `
WITH taken AS (
	DELETE FROM {p}ready_executions r WHERE r.job_id = ANY(ARRAY(
		SELECT job_id FROM {p}ready_executions WHERE queue = $1` + guard + `
		ORDER BY priority DESC, job_id LIMIT $2
		FOR UPDATE SKIP LOCKED))
	RETURNING r.job_id
), claimed AS (
	INSERT INTO {p}claimed_executions (job_id, queue, process_id, claimed_at)
	SELECT job_id, $1, $3, $4 FROM taken RETURNING job_id, fence
)
SELECT ` + jobColumns + `, c.fence
FROM {p}jobs j JOIN claimed c ON c.job_id = j.id
WHERE j.id = ANY(ARRAY(SELECT job_id FROM claimed))
ORDER BY j.priority DESC, j.id`
}

// isPaused reads whether queue $1 is paused.
const isPaused = `EXISTS (SELECT 1 FROM {p}paused_queues WHERE queue = $1)`

// deadFor is the condition that process p (the row, aliased p) is dead at
// $1 after a silence of silenceMS: it has been silent that long, and
// another process's heartbeats landed without a gap for as long within
// that silence, so the database was writable and the silence is p's own
// (driver package doc, "Dead processes").
func deadFor(silenceMS string) string {
	return `p.last_heartbeat_at < $1::timestamptz - ` + silenceMS + ` * interval '1 millisecond'
	AND EXISTS (SELECT 1 FROM {p}processes q WHERE q.id <> p.id
		AND q.last_heartbeat_at - greatest(p.last_heartbeat_at, q.beating_since) > ` + silenceMS + ` * interval '1 millisecond')`
}

func newQueries(prefix string) *queries {
	p := sqltext.Spelling(prefix)
	return &queries{
		SharedQueries: newSharedQueries(p),
		spell:         p,
		// IDs come from an identity column, so they rise in the order the
		// ORDER BY feeds rows in; numbering them by id recovers each input
		// row's place and with it the execution table it belongs in.
		insertJobs: p(`
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::int[], $5::int[], $6::text[],
		$7::int[], $8::bigint[], $9::smallint[], $10::timestamptz[], $11::text[], $13::int[], $14::text[], $15::text[],
		$16::text[], $17::int[], $18::bigint[], $19::text[], $20::text[])
	WITH ORDINALITY AS t(kind, queue, args, priority, max_attempts, ckey, clim, cdur, conflict, scheduled_at, state, mblocked,
		meta, tags, rkey, rlim, rperiod, line, more, ord)
), inserted AS (
	INSERT INTO {p}jobs (kind, queue, args, priority, max_attempts, concurrency_key, concurrency_limit,
		concurrency_duration_ms, on_conflict, max_blocked, scheduled_at, created_at, metadata, tags,
		rate_key, rate_limit, rate_period_ms, more_keys)
	SELECT kind, queue, args, priority, max_attempts, NULLIF(ckey, ''), clim, cdur, conflict, mblocked, scheduled_at, $12,
		NULLIF(meta, '')::jsonb, NULLIF(tags, '')::jsonb, NULLIF(rkey, ''), rlim, rperiod, NULLIF(more, '')
	FROM input ORDER BY ord
	RETURNING id
), numbered AS (
	SELECT id, row_number() OVER (ORDER BY id) AS ord FROM inserted
), placed AS (
	SELECT n.id, i.queue, i.priority, coalesce(NULLIF(i.line, ''), i.ckey) AS line, i.scheduled_at, i.state
	FROM numbered n JOIN input i ON i.ord = n.ord
), r AS (
	INSERT INTO {p}ready_executions (job_id, queue, priority, created_at)
	SELECT id, queue, priority, $12 FROM placed WHERE state = 'ready'
), s AS (
	INSERT INTO {p}scheduled_executions (job_id, queue, priority, scheduled_at)
	SELECT id, queue, priority, scheduled_at FROM placed WHERE state = 'scheduled'
), b AS (
	INSERT INTO {p}blocked_executions (job_id, queue, priority, concurrency_key, created_at)
	SELECT id, queue, priority, line, $12 FROM placed WHERE state = 'blocked'
), k AS (
	-- Every key of each multi-key job, by its input row's place ($21).
	INSERT INTO {p}job_keys (job_id, key)
	SELECT n.id, t.key FROM unnest($21::bigint[], $22::text[]) AS t(ord, key) JOIN numbered n ON n.ord = t.ord
)
SELECT id FROM numbered ORDER BY ord`),

		insertPlainJobs: p(leanInsertJobs(false)),
		insertKeyedJobs: p(leanInsertJobs(true)),
		insertReady: p(`INSERT INTO {p}ready_executions (job_id, queue, priority, created_at)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::timestamptz[])`),
		insertScheduled: p(`INSERT INTO {p}scheduled_executions (job_id, queue, priority, scheduled_at)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::timestamptz[])`),
		insertBlocked: p(`INSERT INTO {p}blocked_executions (job_id, queue, priority, concurrency_key, created_at)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::timestamptz[])`),

		// Queues with a MaxActive policy are claimed by lifecycle.Claim's
		// transaction; this one-statement claim leaves them alone, and
		// paused queues too (lifecycle.Claim then reads their gate).
		claimUncapped: p(claimFrom(`
		AND NOT EXISTS (SELECT 1 FROM {p}policies WHERE queue = $1 AND max_active > 0)
		AND NOT EXISTS (SELECT 1 FROM {p}paused_queues WHERE queue = $1)`)),
		claimReady: p(claimFrom("")),
		queueGate:  p(`SELECT coalesce(max(max_active), 0), ` + isPaused + ` FROM {p}policies WHERE queue = $1`),
		// No row, no cap: coalesce(max()) reads 0 rather than no rows.
		lockQueueGate: p(`SELECT coalesce(max(max_active), 0), ` + isPaused + `
FROM (SELECT max_active FROM {p}policies WHERE queue = $1 FOR UPDATE) p`),
		hasReady:     p(`SELECT EXISTS (SELECT 1 FROM {p}ready_executions WHERE queue = $1)`),
		countClaimed: p(`SELECT count(*) FROM {p}claimed_executions WHERE queue = $1`),
		deleteClaim:  p(`DELETE FROM {p}claimed_executions WHERE job_id = $1 AND fence = $2`),
		// One statement ends a batch of runs: only claims whose fence
		// still matches are deleted, and only their jobs finish.
		completeClaims: p(`
WITH done AS (
	DELETE FROM {p}claimed_executions c USING unnest($1::bigint[], $2::bigint[]) AS t(job_id, fence)
	WHERE c.job_id = ANY($1::bigint[]) AND c.job_id = t.job_id AND c.fence = t.fence RETURNING c.job_id, c.fence
)
UPDATE {p}jobs j SET attempt = j.attempt + 1, finished_at = $3 FROM done WHERE j.id = done.job_id
RETURNING j.id, done.fence`),
		completeDelete: p(`
WITH done AS (
	DELETE FROM {p}claimed_executions c USING unnest($1::bigint[], $2::bigint[]) AS t(job_id, fence)
	WHERE c.job_id = ANY($1::bigint[]) AND c.job_id = t.job_id AND c.fence = t.fence RETURNING c.job_id, c.fence
)
DELETE FROM {p}jobs j USING done WHERE j.id = done.job_id RETURNING j.id, done.fence`),
		finishJob: p(`UPDATE {p}jobs SET attempt = attempt + CASE WHEN $3 THEN 0 ELSE 1 END,
	finished_at = $2, discarded = $3 WHERE id = $1`),
		// The hot-path execution rows have no foreign key (migration
		// 12): a job's delete takes any of them with it.
		deleteJobs: p(`WITH gone AS (DELETE FROM {p}jobs WHERE id = ANY($1::bigint[]) RETURNING id)` + deleteHotRows + `
SELECT 1`),
		recordError: p(`UPDATE {p}jobs SET attempt = attempt + 1, last_error = $2 WHERE id = $1`),
		insertFailed: p(`INSERT INTO {p}failed_executions (job_id, queue, error, failed_at)
SELECT id, queue, $2, $3 FROM {p}jobs WHERE id = $1`),

		semEnsure: p(`INSERT INTO {p}semaphores (key, value, lim, blocked, duration_ms, expires_at)
VALUES ($1, $2, $2, 0, $3, $4) ON CONFLICT (key) DO NOTHING`),
		semLock: p(`
SELECT s.value, s.lim, s.blocked, s.multi, s.duration_ms, s.expires_at,
	coalesce(k.lim, 0), coalesce(p.queue, ''), coalesce(p.max_active_per_key, 0), coalesce(p.max_blocked, 0)
FROM {p}semaphores s
LEFT JOIN {p}key_limits k ON k.key = s.key
LEFT JOIN {p}policies p ON p.queue = $2
WHERE s.key = $1
FOR UPDATE OF s`),
		semTryLock: p(`SELECT 1 FROM {p}semaphores WHERE key = $1 FOR UPDATE SKIP LOCKED`),
		semSave: p(`UPDATE {p}semaphores SET value = $2, lim = $3, blocked = $4, multi = $5, duration_ms = $6,
	expires_at = $7 WHERE key = $1`),
		// RETURNING comes in no set order: the moved rows are read back
		// sorted, so JobIDs are in promotion order.
		promoteBlocked: p(`
WITH picked AS (
	SELECT job_id FROM {p}blocked_executions WHERE concurrency_key = $1
	ORDER BY priority DESC, job_id LIMIT $2
)` + movePicked("$3") + `
SELECT job_id, queue FROM moved ORDER BY priority DESC, job_id`),
		// Admit over many keys at once: create the missing semaphores in
		// key order (a concurrent create of the same key waits for the
		// other transaction, then does nothing, never a unique violation),
		// then lock them all in key order, so two batches never deadlock.
		semEnsureMany: p(`
INSERT INTO {p}semaphores (key, value, lim, blocked, duration_ms, expires_at)
SELECT t.key, t.lim, t.lim, 0, t.duration_ms, t.expires_at
FROM unnest($1::text[], $2::int[], $3::bigint[], $4::timestamptz[]) AS t(key, lim, duration_ms, expires_at)
ORDER BY t.key
ON CONFLICT (key) DO NOTHING`),
		// Read once executor.lockSems holds the rows, in a statement of
		// its own: its snapshot, taken after the locks, sees each row as
		// the transaction it waited for left it, with no row checked
		// again (it locked them itself, FOR UPDATE OF s, before).
		semReadMany: p(`
SELECT s.key, s.value, s.lim, s.blocked, s.multi, s.duration_ms, s.expires_at,
	coalesce(k.lim, 0), coalesce(p.queue, ''), coalesce(p.max_active_per_key, 0), coalesce(p.max_blocked, 0)
FROM {p}semaphores s
JOIN unnest($1::text[], $2::text[]) AS r(key, queue) ON r.key = s.key
LEFT JOIN {p}key_limits k ON k.key = s.key
LEFT JOIN {p}policies p ON p.queue = r.queue
WHERE s.key = ANY($1::text[])`),
		// The ANY makes the rows an index scan: joined to the unnest alone,
		// the planner hashes the whole table.
		semSaveMany: p(`
UPDATE {p}semaphores s SET value = t.value, lim = t.lim, blocked = t.blocked, multi = t.multi,
	duration_ms = t.duration_ms, expires_at = t.expires_at
FROM unnest($1::text[], $2::int[], $3::int[], $4::int[], $5::int[], $6::bigint[], $7::timestamptz[])
	AS t(key, value, lim, blocked, multi, duration_ms, expires_at)
WHERE s.key = t.key AND s.key = ANY($1::text[])`),
		// Release many keys at once: first lock their semaphores in key
		// order (so two batches never deadlock), writing nothing.
		lockSems: p(`SELECT 1 FROM {p}semaphores WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE`),
		// The first of lockSems' rows, alone: the smallest key by the
		// column's own collation (ORDER BY key's), which need not be
		// Go's byte order.
		lockFirstSem: p(`SELECT 1 FROM {p}semaphores WHERE key = (SELECT min(k) FROM unnest($1::text[]) AS k) FOR UPDATE`),
		// Then, in a statement of its own, so its snapshot sees every
		// blocked row committed before the locks were taken (no lost
		// wake-up), give back each key's slots, capped at its limit, and
		// hand what is free to blocked jobs, per key by priority then
		// FIFO, writing each semaphore once. The LATERAL limit keeps each
		// key's scan to the rows it moves, however long the line. A line
		// holding multi-key jobs (multi > 0) gets its slots back but is
		// left to package semaphore, which promotes it head by head: its
		// keys are read back as LineLeft. settled gathers each key's row
		// and its moved jobs by one grouping, not a join per key.
		releasePromote: p(`
WITH freed AS (
	SELECT s.key, LEAST(s.value + r.n, s.lim) AS value, s.multi,
		CASE WHEN s.multi = 0 THEN GREATEST(LEAST(s.value + r.n, s.lim, s.blocked), 0) ELSE 0 END AS take
	FROM unnest($1::text[], $2::int[]) AS r(key, n) JOIN {p}semaphores s ON s.key = r.key
), picked AS (
	SELECT b.job_id FROM freed f, LATERAL (
		SELECT job_id FROM {p}blocked_executions WHERE concurrency_key = f.key
		ORDER BY priority DESC, job_id LIMIT f.take) b
	WHERE f.take > 0
)` + movePicked("$3") + `, settled AS (
	SELECT key, sum(value)::int AS value, sum(take)::int AS take, sum(multi)::int AS multi, count(job_id)::int AS n,
		coalesce(array_agg(DISTINCT queue) FILTER (WHERE queue IS NOT NULL), '{}') AS queues
	FROM (SELECT key, value, take, multi, NULL::bigint AS job_id, NULL::text AS queue FROM freed
		UNION ALL
		SELECT concurrency_key, 0, 0, 0, job_id, queue FROM moved) u
	GROUP BY key
), done AS (
	-- Fewer rows than counted: nothing is left blocked (as
	-- semaphore.Release settles one key). A key that promoted renews its
	-- expiry once less than half its Duration is left (driver.RenewAfter).
	UPDATE {p}semaphores s SET value = t.value - t.n,
		blocked = CASE WHEN t.n < t.take THEN 0 ELSE s.blocked - t.n END,
		expires_at = CASE WHEN t.n > 0 AND s.expires_at < $3::timestamptz + s.duration_ms * interval '0.5 millisecond'
			THEN $3::timestamptz + s.duration_ms * interval '1 millisecond'
			ELSE s.expires_at END
	FROM settled t WHERE s.key = t.key
	RETURNING s.key, t.n, t.queues, t.multi > 0 AS line_left
)
SELECT key, n, queues, line_left FROM done WHERE n > 0 OR line_left`),
		// The live jobs of the key: the single-key jobs whose key it is
		// and the multi-key jobs naming it in job_keys (every key of
		// theirs, the first too), so each is counted once; read once
		// (MATERIALIZED), as the job_keys side joins jobs for finished_at.
		// They hold it while ready, claimed, or waiting in a rate line
		// (kept from admission); a multi-key job waiting in a concurrency
		// line holds none of its keys.
		countHolders: p(`
WITH mine AS MATERIALIZED (
	SELECT id FROM {p}jobs WHERE concurrency_key = $1 AND finished_at IS NULL AND more_keys IS NULL
	UNION ALL
	SELECT j.id FROM {p}job_keys jk JOIN {p}jobs j ON j.id = jk.job_id WHERE jk.key = $1 AND j.finished_at IS NULL
)
SELECT
	(SELECT count(*) FROM mine m JOIN {p}ready_executions r ON r.job_id = m.id)
	+ (SELECT count(*) FROM mine m JOIN {p}claimed_executions c ON c.job_id = m.id)
	+ (SELECT count(*) FROM mine m JOIN {p}blocked_executions b ON b.job_id = m.id
		WHERE b.concurrency_key LIKE '` + rateLine + `%'),
	(SELECT count(*) FROM {p}blocked_executions WHERE concurrency_key = $1),
	(SELECT count(*) FROM {p}blocked_executions b WHERE b.concurrency_key = $1
		AND EXISTS (SELECT 1 FROM {p}job_keys jk WHERE jk.job_id = b.job_id))`),
		// The first n of key's line, by the blocked_line index, with each
		// job's keys: its first (the jobs columns) and more_keys.
		lineHeads: p(`
SELECT b.job_id, b.queue, b.priority, coalesce(j.concurrency_key, ''), j.concurrency_limit,
	j.concurrency_duration_ms, j.on_conflict, j.max_blocked, j.more_keys
FROM (SELECT job_id, queue, priority FROM {p}blocked_executions WHERE concurrency_key = $1
	ORDER BY priority DESC, job_id LIMIT $2) b
JOIN {p}jobs j ON j.id = b.job_id
ORDER BY b.priority DESC, b.job_id`),
		moveToLine: p(`UPDATE {p}blocked_executions SET concurrency_key = $3 WHERE job_id = $1 AND concurrency_key = $2`),
		// lineHeads over many keys ($1, with their ns $2): the LATERAL
		// limit walks each key's blocked_line index for its first n only.
		// ord is the key's place in $1, where its heads go.
		lineHeadsMany: p(`
SELECT k.ord, b.job_id, b.queue, b.priority, coalesce(j.concurrency_key, ''), j.concurrency_limit,
	j.concurrency_duration_ms, j.on_conflict, j.max_blocked, j.more_keys
FROM unnest($1::text[], $2::int[]) WITH ORDINALITY AS k(key, n, ord)
CROSS JOIN LATERAL (SELECT job_id, queue, priority FROM {p}blocked_executions WHERE concurrency_key = k.key
	ORDER BY priority DESC, job_id LIMIT k.n) b
JOIN {p}jobs j ON j.id = b.job_id
ORDER BY k.ord, b.priority DESC, b.job_id`),
		// Rows are locked after the sort, so in key order; SKIP LOCKED
		// passes over the rows another transaction holds, never waits.
		semTryLockMany: p(`
SELECT key, value, lim, blocked, multi, duration_ms, expires_at FROM {p}semaphores
WHERE key = ANY($1::text[])
ORDER BY key
FOR UPDATE SKIP LOCKED`),
		// promoteBlocked over many keys ($1, with their counts $2): pick
		// each key's first n by its blocked_line index (the LATERAL
		// limit), move them to ready, and read back what moved.
		promoteFirst: p(`
WITH picked AS (
	SELECT b.job_id FROM unnest($1::text[], $2::int[]) AS w(key, n), LATERAL (
		SELECT job_id FROM {p}blocked_executions WHERE concurrency_key = w.key
		ORDER BY priority DESC, job_id LIMIT w.n) b
)` + movePicked("$3") + `
SELECT concurrency_key, job_id, queue FROM moved ORDER BY priority DESC, job_id`),

		hasDueScheduled: p(`SELECT EXISTS (SELECT 1 FROM {p}scheduled_executions WHERE scheduled_at <= $1)`),
		takeDueScheduled: p(`
WITH due AS (
	SELECT job_id FROM {p}scheduled_executions WHERE scheduled_at <= $1
	ORDER BY scheduled_at, priority DESC, job_id LIMIT $2
	FOR UPDATE SKIP LOCKED
), taken AS (
	DELETE FROM {p}scheduled_executions s USING due WHERE s.job_id = due.job_id RETURNING s.job_id
)
SELECT ` + jobColumns + `
FROM taken t JOIN {p}jobs j ON j.id = t.job_id
ORDER BY j.priority DESC, j.id`),
		// Idle ones (every slot free, nothing blocked) have nothing to
		// reclaim: they are left to expire and be deleted.
		expiredSems: p(`SELECT key FROM {p}semaphores WHERE expires_at < $1 AND (value < lim OR blocked > 0)
AND key > $2 ORDER BY key LIMIT $3`),
		promotableSems: p(`SELECT key FROM {p}semaphores WHERE value > 0 AND blocked > 0 AND key > $1
ORDER BY key LIMIT $2`),
		deleteIdleSems: p(`
DELETE FROM {p}semaphores WHERE key IN (
	SELECT s.key FROM {p}semaphores s
	WHERE s.expires_at < $1 AND s.value >= s.lim AND s.blocked = 0
		AND NOT EXISTS (SELECT 1 FROM {p}blocked_executions b WHERE b.concurrency_key = s.key)
		-- A blocked multi-key job waits in one line but needs the
		-- semaphores of all its keys when promoted.
		AND s.multi = 0
		AND NOT EXISTS (SELECT 1 FROM {p}job_keys jk JOIN {p}blocked_executions b ON b.job_id = jk.job_id
			WHERE jk.key = s.key)
	ORDER BY s.key LIMIT $2
	FOR UPDATE SKIP LOCKED)`),
		lostClaims: p(`
SELECT ` + jobColumns + `, c.fence, c.claimed_at
FROM {p}claimed_executions c
JOIN {p}jobs j ON j.id = c.job_id
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE p.id IS NULL OR (` + deadFor(`greatest($2::bigint, p.dead_after_ms)`) + `)
ORDER BY c.job_id LIMIT $3
FOR UPDATE OF c SKIP LOCKED`),
		lostClaimsOfKey: p(`
SELECT ` + jobColumns + `, c.fence, c.claimed_at
FROM {p}jobs j
JOIN {p}claimed_executions c ON c.job_id = j.id
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE j.id IN (SELECT id FROM {p}jobs WHERE concurrency_key = $2 AND finished_at IS NULL
		UNION ALL SELECT job_id FROM {p}job_keys WHERE key = $2)
	AND j.finished_at IS NULL
	AND (p.id IS NULL OR (` + deadFor(`greatest($3::bigint, j.concurrency_duration_ms, 3 * p.heartbeat_interval_ms)`) + `))
ORDER BY c.job_id
FOR UPDATE OF c SKIP LOCKED`),
		deleteFinished: p(`WITH gone AS (DELETE FROM {p}jobs WHERE id IN (
	SELECT id FROM {p}jobs WHERE finished_at < $1 ORDER BY finished_at LIMIT $2) RETURNING id)` + deleteHotRows + `
SELECT count(*) FROM gone`),

		heartbeat: p(`UPDATE {p}processes SET last_heartbeat_at = $2, beating_since = $3 WHERE id = $1`),
		// Renew in key order, skipping rows someone holds: two renewals
		// never deadlock, and a skipped key is renewed next beat.
		renewSems: p(`
UPDATE {p}semaphores s SET expires_at = $2::timestamptz + s.duration_ms * interval '1 millisecond'
WHERE s.key IN (
	SELECT s2.key FROM {p}semaphores s2
	WHERE s2.key IN (
		SELECT j.concurrency_key FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id
		WHERE c.process_id = $1 AND j.concurrency_key IS NOT NULL
		UNION ALL -- a multi-key job's other keys
		SELECT jk.key FROM {p}claimed_executions c JOIN {p}job_keys jk ON jk.job_id = c.job_id
		WHERE c.process_id = $1)
	AND s2.expires_at < $2::timestamptz + s2.duration_ms * $3::float8 * interval '1 millisecond'
	ORDER BY s2.key
	FOR UPDATE SKIP LOCKED)`),
		deleteDeadProcesses: p(`DELETE FROM {p}processes p WHERE ` + deadFor(`greatest($2::bigint, p.dead_after_ms)`) + `
AND NOT EXISTS (SELECT 1 FROM {p}claimed_executions c WHERE c.process_id = p.id)`),

		// Every key of the queue's live jobs, a multi-key job's More too
		// (more_keys leaves "to" out when 0), on the same scan as before.
		policyKeys: p(`
SELECT DISTINCT k.key FROM {p}jobs j CROSS JOIN LATERAL (
	SELECT j.concurrency_key AS key, j.concurrency_limit AS lim
	UNION ALL
	SELECT m->>'key', coalesce((m->>'to')::int, 0) FROM jsonb_array_elements(coalesce(j.more_keys, '[]')::jsonb) m
) k
WHERE j.queue = $1 AND j.concurrency_key IS NOT NULL AND j.finished_at IS NULL AND k.lim = 0 ORDER BY 1`),
		// The newest live job naming the key, first or in job_keys.
		latestJobLimit: p(`SELECT ` + jobColumns + ` FROM {p}jobs j WHERE j.id = (SELECT max(id) FROM (
	(SELECT id FROM {p}jobs WHERE concurrency_key = $1 AND finished_at IS NULL ORDER BY id DESC LIMIT 1)
	UNION ALL
	(SELECT jk.job_id FROM {p}job_keys jk JOIN {p}jobs k ON k.id = jk.job_id
	WHERE jk.key = $1 AND k.finished_at IS NULL ORDER BY jk.job_id DESC LIMIT 1)) t)`),

		cancelJob: p(`UPDATE {p}jobs SET attempt = attempt + CASE WHEN $3 THEN 1 ELSE 0 END, finished_at = $2,
	cancelled = true, last_error = coalesce(nullif($4::text, ''), last_error) WHERE id = $1`),
		markCancel: p(`UPDATE {p}claimed_executions SET cancel_requested_at = coalesce(cancel_requested_at, $2)
WHERE job_id = $1 RETURNING cancel_requested_at`),

		history: newHistoryQueries(p),
		unique:  newUniqueQueries(prefix),
		rate:    newRateQueries(p),
	}
}

// leanInsertJobs is insertJobs for jobs executor.lean passes: no rate,
// metadata, tags, second key or line. $1 is now; $2-$7 each job's kind,
// queue, args, priority, max_attempts and scheduled_at; with keyed, $8-$12
// its key, limit, duration, on_conflict and max_blocked. A job due later
// goes in scheduled; one due now ready if unkeyed and pending if keyed,
// with no execution row (admission writes it). The ids rise in input
// order, as insertJobs' do. Seven or twelve columns rather than nineteen,
// and none of insertJobs' joins back to its input.
func leanInsertJobs(keyed bool) string {
	var cols, sel, arrays, names string
	if keyed {
		cols = ", concurrency_key, concurrency_limit, concurrency_duration_ms, on_conflict, max_blocked"
		sel = ", NULLIF(ckey, ''), clim, cdur, conflict, mblocked"
		arrays = ", $8::text[], $9::int[], $10::bigint[], $11::smallint[], $12::int[]"
		names = ", ckey, clim, cdur, conflict, mblocked"
	}
	return `
WITH inserted AS (
	INSERT INTO {p}jobs (kind, queue, args, priority, max_attempts, scheduled_at, created_at` + cols + `)
	SELECT kind, queue, args, priority, max_attempts, scheduled_at, $1` + sel + `
	FROM unnest($2::text[], $3::text[], $4::jsonb[], $5::int[], $6::int[], $7::timestamptz[]` + arrays + `)
		WITH ORDINALITY AS t(kind, queue, args, priority, max_attempts, scheduled_at` + names + `, ord)
	ORDER BY ord
	RETURNING id, queue, priority, scheduled_at, concurrency_key
), r AS (
	INSERT INTO {p}ready_executions (job_id, queue, priority, created_at)
	SELECT id, queue, priority, $1 FROM inserted WHERE scheduled_at <= $1 AND concurrency_key IS NULL
), s AS (
	INSERT INTO {p}scheduled_executions (job_id, queue, priority, scheduled_at)
	SELECT id, queue, priority, scheduled_at FROM inserted WHERE scheduled_at > $1
)
SELECT id FROM inserted ORDER BY id`
}
