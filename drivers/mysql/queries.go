package mysql

import (
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/internal/sqltext"
)

// MySQL's statements, with the table prefix spliced in once; those both
// database/sql dialects spell alike are sqlexec.Common's.
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

// ownQueries are the statements of the steps MySQL takes its own way
// (dialect.go).
type ownQueries struct {
	pickClaim, pickUncapped                                     string
	lostClaims, lostClaimsOfKey, lockClaims, selectLockedClaims string
	heldKeys, pickRenewable, renewSems                          string
	deadProcesses, lockProcesses, deleteProcesses               string
}

// rateLineHash is the hash of the line key (driver.RateLine) of rate row
// {t}: its blocked rows' and its adaptive limit's key_hash.
const rateLineHash = "UNHEX(SHA2(CONCAT('" + driver.RateLinePrefix + "', {t}.rate_key), 256))"

func newQueries(prefix string) (*sqlexec.Queries, *ownQueries) {
	p := sqltext.Spelling(prefix)
	// Keys are read by their hash, on the indexes named.
	q := sqlexec.Common(p, sqlexec.KeySpelling{Column: "concurrency_key_hash", JobKeysColumn: "key_hash",
		JobsIndex: " FORCE INDEX ({p}jobs_live_key)", LineIndex: " FORCE INDEX ({p}blocked_line)", InRateLine: inRateLine})

	// The index matches the ORDER BY, so the scan stops after the rows it
	// returns and locks no others.
	// Unique jobs: the stripe's lock row, upserted (a duplicate-key error
	// would leave a shared lock that deadlocks on upgrade), then a locking
	// read of the key's jobs, which sees the latest commits even in a
	// caller's REPEATABLE READ transaction. The state's subqueries read
	// that transaction's snapshot (locking them would lock gaps every new
	// job falls in): a job committed since shows no state, "", and counts.
	q.InsertJobKeys = p("INSERT INTO {p}job_keys (job_id, key_hash, `key`) VALUES ")
	q.LockUnique = p(`INSERT INTO {p}unique_locks (stripe) VALUES (?) ON DUPLICATE KEY UPDATE stripe = stripe`)
	q.FindUnique = p(`SELECT j.id, ` + sqltext.JobState + `
FROM {p}unique_keys u JOIN {p}jobs j ON j.id = u.job_id
WHERE u.unique_key = ? AND (` + sqltext.JobState + ` IN ` + list + ` OR ` + sqltext.JobState + ` = '')
ORDER BY u.job_id DESC LIMIT 1 LOCK IN SHARE MODE`)
	q.SetUniqueKey = p(`INSERT INTO {p}unique_keys (unique_key, job_id) VALUES (?, ?)`)
	q.UniqueKeyOf = p(`SELECT coalesce(max(unique_key), '') FROM {p}unique_keys WHERE job_id = ?`)

	q.PickReady = p(`SELECT job_id FROM {p}ready_executions FORCE INDEX ({p}ready_poll)
WHERE queue = ? AND ` + keyNotPaused(`{p}ready_executions.job_id`) + `
ORDER BY priority DESC, job_id LIMIT ? FOR UPDATE SKIP LOCKED`)
	q.PickAmong = p(sqlexec.AmongPick(list, " FOR UPDATE SKIP LOCKED", keyNotPaused))
	q.PickHandOff = p(sqlexec.HandOffPick(list, " FOR UPDATE SKIP LOCKED", keyNotPaused))
	q.DeleteReady = p(`DELETE FROM {p}ready_executions WHERE job_id IN ` + list + ` ORDER BY job_id` + byKey)
	q.InsertClaims = p(`INSERT INTO {p}claimed_executions (job_id, queue, process_id, claimed_at) VALUES `)
	q.DeleteJobs = p(`DELETE FROM {p}jobs WHERE id IN ` + list + ` ORDER BY id` + byKey)
	// A batch of completions locks its claims by fence, the primary key,
	// in its order, then ends them and their jobs by key: a stale fence
	// names no row and locks nothing (READ COMMITTED takes no gap lock).
	// Their jobs' rows are locked with them: a dependent enqueued while
	// a job ran marks its row (DependencyMark), and the completion reads
	// the mark once that enqueue has committed.
	q.LockEnding = p(`SELECT c.fence, c.job_id, j.has_dependents FROM {p}claimed_executions c
JOIN {p}jobs j ON j.id = c.job_id WHERE c.fence IN ` + list + ` ORDER BY c.fence` + byKey + ` FOR UPDATE`)
	q.DeleteClaims = p(`DELETE FROM {p}claimed_executions WHERE fence IN ` + list + ` ORDER BY fence` + byKey)
	q.FinishJobs = p(`UPDATE {p}jobs SET attempt = attempt + 1, finished_at = ?, discarded = FALSE
WHERE id IN ` + list + ` ORDER BY id` + byKey)
	// Claimers of a capped queue take turns on its policy row, then count
	// its claims in a statement of their own, after the lock.
	// The claim's gate locks the queue's policy row; the paused_queues
	// subquery takes no lock.
	q.Gate += "\nFOR UPDATE"
	// A run's end locks its claim before reading its cancel mark, so a
	// cancel marking it waits for that end (and then finds no claim).
	q.CancelRequested += " FOR UPDATE"
	// Two finishes of one job cannot both take its edges.
	q.Dependencies.LockDependents += " FOR UPDATE"
	q.Dependencies.LockCancels += " FOR UPDATE"
	// The inbox's times are DATETIME(6) (a client writes created_at by
	// its default); a DELETE of one table takes its own LIMIT.
	q.Inbox = sqlexec.InboxStatements(p, sqlexec.InboxSpelling{
		KindIn:        `kind IN ` + list,
		Now:           `CURRENT_TIMESTAMP(6)`,
		Before:        `{col} < CURRENT_TIMESTAMP(6) - INTERVAL ? * 1000 MICROSECOND`,
		SkipLocked:    ` FOR UPDATE SKIP LOCKED`,
		DeleteDecided: `DELETE FROM {p}inbox WHERE {cond} ORDER BY decided_at LIMIT ?`,
	})
	q.RunningSlots = p(`SELECT coalesce(sum(j.slots), 0) FROM {p}claimed_executions c FORCE INDEX ({p}claimed_queue)
STRAIGHT_JOIN {p}jobs j ON j.id = c.job_id WHERE c.queue = ?`)

	// Never a plain INSERT caught on its duplicate-key error: that leaves
	// a shared lock on the row, and two transactions upgrading theirs to
	// lock it deadlock. ON DUPLICATE KEY UPDATE takes the exclusive lock
	// at once.
	q.SemEnsure = p("INSERT INTO {p}semaphores (key_hash, `key`, value, lim, blocked, duration_ms, expires_at)\n" +
		"VALUES (?, ?, ?, ?, 0, ?, ?) ON DUPLICATE KEY UPDATE `key` = `key`")
	// The override and the policy come from subqueries, which a locking
	// read does not lock: only the semaphore row is locked.
	q.SemLock = p(`SELECT ` + sqlexec.SemColumns("key_hash", "?", "s.release_interval_us, s.last_release_at") + `
FROM {p}semaphores s WHERE s.key_hash = ? AND s.` + "`key`" + ` = ? FOR UPDATE`)
	q.SemTryLock = p(`SELECT 1 FROM {p}semaphores WHERE key_hash = ? AND ` + "`key`" + ` = ? FOR UPDATE SKIP LOCKED`)
	q.SemLockRow = p(`SELECT 1 FROM {p}semaphores WHERE key_hash = ? AND ` + "`key`" + ` = ? FOR UPDATE`)
	q.SemSave = p(`UPDATE {p}semaphores SET value = ?, lim = ?, blocked = ?, multi = ?, duration_ms = ?, expires_at = ?,
	release_interval_us = CASE WHEN ? THEN ? ELSE release_interval_us END,
	last_release_at = CASE WHEN ? THEN ? ELSE last_release_at END
WHERE key_hash = ?`)
	q.PickBlocked = p(`SELECT job_id, queue, priority FROM {p}blocked_executions FORCE INDEX ({p}blocked_line)
WHERE concurrency_key_hash = ? ORDER BY priority DESC, job_id LIMIT ?`)
	q.DeleteBlocked = p(`DELETE FROM {p}blocked_executions WHERE job_id IN ` + list + ` ORDER BY job_id` + byKey)
	// A batch of releases locks its semaphores in one statement, in key
	// order as admission does: the keys' table is read first
	// (STRAIGHT_JOIN), sorted, since the ORDER BY names it alone, and each
	// semaphore is then locked by its primary key. The index is forced: on
	// a small table the optimizer would rather scan it, and a locking scan
	// locks every row it reads, in the table's order, not the keys' — two
	// batches of crossing keys then deadlock. Each key's pick is the
	// per-key one (PickBlocked), bounded by the line index however long
	// the line.
	q.Release = sqlexec.ReleaseQueries{
		Lock: p(`SELECT t.at, s.value, s.lim, s.blocked, s.multi, s.duration_ms, s.expires_at, s.release_interval_us, s.last_release_at
FROM ` + list + ` t STRAIGHT_JOIN {p}semaphores s FORCE INDEX (PRIMARY) ON s.key_hash = t.k ORDER BY t.at FOR UPDATE`),
		// The hash is cast: a parameter the client does not interpolate
		// would make the column a string of the connection's character
		// set, which mangles a hash's bytes and finds no semaphore.
		FirstKey: `SELECT ? AS at, CAST(? AS BINARY(32)) AS k`,
		NextKey:  ` UNION ALL SELECT ?, CAST(? AS BINARY(32))`,
		PickBranch: p(`SELECT ? AS at, job_id, queue, priority FROM {p}blocked_executions FORCE INDEX ({p}blocked_line)
WHERE concurrency_key_hash = ? ORDER BY priority DESC, job_id LIMIT ?`),
		SaveHead: p("INSERT INTO {p}semaphores (key_hash, `key`, value, lim, blocked, multi, duration_ms, expires_at) VALUES "),
		TimedHead: p("INSERT INTO {p}semaphores (key_hash, `key`, value, lim, blocked, multi, duration_ms, expires_at,\n" +
			"release_interval_us, last_release_at) VALUES "),
		SaveTail: "\nON DUPLICATE KEY UPDATE value = VALUES(value), blocked = VALUES(blocked), expires_at = VALUES(expires_at),\n" +
			"release_interval_us = VALUES(release_interval_us), last_release_at = VALUES(last_release_at)",
	}
	// Set-wise promotion of lines holding multi-key jobs: the try-lock is
	// the release's lock skipping rows others hold, in key order; each
	// key's branch reads the head of its line by the line index, as
	// LineListHeads and PickBlocked do.
	q.Multi = sqlexec.MultiQueries{
		TryLock: p(`SELECT t.at, s.value, s.lim, s.blocked, s.multi, s.duration_ms, s.expires_at
FROM ` + list + ` t STRAIGHT_JOIN {p}semaphores s FORCE INDEX (PRIMARY) ON s.key_hash = t.k ORDER BY t.at FOR UPDATE SKIP LOCKED`),
		FirstKey: q.Release.FirstKey,
		NextKey:  q.Release.NextKey,
		HeadsBranch: p(`SELECT ? AS at, b.job_id, b.queue, b.priority, coalesce(j.concurrency_key, ''), j.concurrency_limit,
	j.concurrency_duration_ms, j.on_conflict, j.max_blocked, j.more_keys, j.slots
FROM {p}blocked_executions b FORCE INDEX ({p}blocked_line) JOIN {p}jobs j ON j.id = b.job_id
WHERE b.concurrency_key_hash = ? ORDER BY b.priority DESC, b.job_id LIMIT ?`),
		PickBranch: q.Release.PickBranch,
		BranchHead: "(",
		BranchTail: ")",
	}
	// Admission over many keys creates the missing semaphores in key
	// order (a duplicate key updates nothing, never an error whose shared
	// lock would deadlock on the upgrade), then locks them all in key
	// order as a batch of releases does. The override and the policy come
	// from subqueries, which a locking read does not lock.
	q.Admit = sqlexec.AdmitQueries{
		EnsureTail: "\nON DUPLICATE KEY UPDATE `key` = `key`",
		Lock: p(`SELECT t.at, ` + sqlexec.SemColumns("key_hash", "t.q", "s.release_interval_us") + `
FROM ` + list + ` t STRAIGHT_JOIN {p}semaphores s FORCE INDEX (PRIMARY) ON s.key_hash = t.k ORDER BY t.at FOR UPDATE`),
		FirstKey: `SELECT ? AS at, CAST(? AS BINARY(32)) AS k, CAST(? AS BINARY) AS q`,
		NextKey:  ` UNION ALL SELECT ?, CAST(? AS BINARY(32)), CAST(? AS BINARY)`,
		SaveTail: "\nON DUPLICATE KEY UPDATE value = VALUES(value), lim = VALUES(lim), blocked = VALUES(blocked), multi = VALUES(multi),\n" +
			"duration_ms = VALUES(duration_ms), expires_at = VALUES(expires_at)",
	}

	q.PickDueScheduled = p(`SELECT job_id FROM {p}scheduled_executions FORCE INDEX ({p}scheduled_due)
WHERE scheduled_at <= ? ORDER BY scheduled_at, priority DESC, job_id LIMIT ? FOR UPDATE SKIP LOCKED`)
	q.DeleteScheduled = p(`DELETE FROM {p}scheduled_executions WHERE job_id IN ` + list + ` ORDER BY job_id` + byKey)
	// Idle ones (every slot free, nothing blocked) have nothing to
	// reclaim: they are left to expire and be deleted.
	q.ExpiredSems = p("SELECT `key` FROM {p}semaphores WHERE expires_at < ? AND (value < lim OR blocked > 0)\n" +
		"AND `key` > ? ORDER BY `key` LIMIT ?")
	q.PromotableSems = p("SELECT `key` FROM {p}semaphores WHERE value > 0 AND blocked > 0 AND `key` > ?\n" +
		"ORDER BY `key` LIMIT ?")
	q.AllSems = p("SELECT `key` FROM {p}semaphores WHERE `key` > ? ORDER BY `key` LIMIT ?")
	// In expiry order, the index's: the scan stops after the rows it
	// returns. A semaphore a blocked multi-key job names is kept: that
	// job's promotion finds it. A locking read sees the rows' latest values, so what it
	// locks is idle now and stays so until the delete.
	q.PickIdleSems = p(`SELECT s.key_hash FROM {p}semaphores s FORCE INDEX ({p}semaphores_expires)
WHERE s.expires_at < ? AND s.value >= s.lim AND s.blocked = 0 AND s.multi = 0
	AND NOT EXISTS (SELECT 1 FROM {p}blocked_executions b WHERE b.concurrency_key_hash = s.key_hash)
	AND NOT EXISTS (SELECT 1 FROM {p}job_keys jk JOIN {p}blocked_executions b ON b.job_id = jk.job_id
		WHERE jk.key_hash = s.key_hash)
ORDER BY s.expires_at LIMIT ? FOR UPDATE SKIP LOCKED`)
	q.DeleteSems = p(`DELETE FROM {p}semaphores WHERE key_hash IN ` + list + ` ORDER BY key_hash` + byKey)
	q.DeleteFinished = p(`DELETE FROM {p}jobs WHERE finished_at < ? ORDER BY finished_at LIMIT ?`)

	q.CountByQueue = p(sqltext.CountByQueue(func(col string) string { return "CAST(sum(" + col + ") AS SIGNED)" }))

	q.LockPolicies += " FOR UPDATE"
	q.InsertPolicy = p(`INSERT INTO {p}policies (queue, namespace, max_active, max_active_per_key, max_blocked,
	max_starts_per_key, starts_period_ms, fair_share, key_weight, max_wait_us, adaptive_min, created_at, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE queue = queue`)
	q.Periodic.Lock += " FOR UPDATE"
	q.Periodic.Insert = p(`INSERT INTO {p}periodic_jobs (name, kind, schedule, next_run_at, created_at, seen_at)
VALUES (?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE name = name`)
	q.PauseQueue = p(`INSERT INTO {p}paused_queues (queue, paused_at) VALUES (?, ?) ON DUPLICATE KEY UPDATE queue = queue`)
	q.PauseKey = p("INSERT INTO {p}paused_keys (key_hash, `key`, paused_at) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE key_hash = key_hash")
	q.ResumeKey = p("DELETE FROM {p}paused_keys WHERE key_hash = ? AND `key` = ?")
	q.PausedKeys = p("SELECT `key`, paused_at FROM {p}paused_keys ORDER BY `key`")
	q.GetKeyAdapt = p("SELECT `key`, lim, min_lim, successes, adapted_at FROM {p}key_adapt WHERE key_hash = ? AND `key` = ?")
	q.SetKeyAdapt = p("INSERT INTO {p}key_adapt (key_hash, `key`, lim, min_lim, successes, adapted_at) VALUES (?, ?, ?, ?, ?, ?)\n" +
		"ON DUPLICATE KEY UPDATE lim = VALUES(lim), min_lim = VALUES(min_lim), successes = VALUES(successes), adapted_at = VALUES(adapted_at)")
	q.DeleteKeyAdapt = p("DELETE FROM {p}key_adapt WHERE key_hash = ? AND `key` = ?")
	q.ListKeyAdapt = p("SELECT `key`, lim, min_lim, successes, adapted_at FROM {p}key_adapt ORDER BY `key` LIMIT ?")
	q.SetKeyLimit = p("INSERT INTO {p}key_limits (key_hash, `key`, lim, updated_at) VALUES (?, ?, ?, ?)\n" +
		"ON DUPLICATE KEY UPDATE lim = VALUES(lim), updated_at = VALUES(updated_at)")
	q.DeleteKeyLimit = p("DELETE FROM {p}key_limits WHERE key_hash = ? AND `key` = ?")
	q.ReadyByKey = p(sqltext.ReadyByKey(sqltext.FairRead{JobsOf: sqltext.ReadyJobs,
		WeightOn: "w.key_hash = j.concurrency_key_hash AND w.`key` = j.concurrency_key", NotPaused: keyNotPaused(`{p}ready_executions.job_id`)}))
	// A fair claim about to read per key first gives the queue's ready
	// rows made since its last such read their key's hash (the hash of
	// '' for a keyless job), each probing its job: the rows are made
	// without it (migration 00025). The job is read, not locked (READ
	// COMMITTED). The claim holds the queue's policy row, so the fills
	// of one queue do not overlap.
	q.FillReadyKeys = p(`UPDATE {p}ready_executions r
SET r.concurrency_key_hash = coalesce((SELECT j.concurrency_key_hash FROM {p}jobs j WHERE j.id = r.job_id), ` + emptyKeyHash + `)
WHERE r.queue = ? AND r.concurrency_key_hash IS NULL`)
	// Each key's first ? ready jobs (KeyViewParams.PerKey): a window over
	// the queue's entries of ready_key, which hold the hash, the priority
	// and the id, so the rows are numbered without reading a job; only
	// the rows kept are joined to their jobs (12 ms for a 10,000-row line
	// of 10 keys, where the whole read joins every row). MariaDB has no
	// LATERAL and no LIMIT in an IN list, which would read each key's
	// first entries alone, and plans no range on a correlated key, which
	// a recursive skip over the keys needs (each step read half the line:
	// 21 ms). A paused key's jobs, and a job paused by a further key of
	// its own, are left out before the numbering, as ReadyByKey leaves
	// them out.
	q.ReadyPerKey = p(`SELECT 0, coalesce(j.concurrency_key, ''), x.job_id, j.slots,
	CASE WHEN ` + sqltext.MaxWeight + " > 0 THEN coalesce((SELECT w.weight FROM {p}key_weights w WHERE w.key_hash = j.concurrency_key_hash AND w.`key` = j.concurrency_key), 0) ELSE 0 END,\n\t" + sqltext.MaxWeight + `, x.priority
FROM (SELECT r.job_id, r.priority,
		ROW_NUMBER() OVER (PARTITION BY r.concurrency_key_hash ORDER BY r.priority DESC, r.job_id) AS n
	FROM {p}ready_executions r FORCE INDEX ({p}ready_key)
	WHERE r.queue = ? AND r.concurrency_key_hash IS NOT NULL AND ` + keyNotPaused(`r.job_id`) + `) x
JOIN {p}jobs j ON j.id = x.job_id
WHERE x.n <= ?
UNION ALL
` + sqltext.RunningByKey + `
ORDER BY 1, 7 DESC, 3`)
	q.SetKeyWeight = p("INSERT INTO {p}key_weights (key_hash, `key`, weight, updated_at) VALUES (?, ?, ?, ?)\n" +
		"ON DUPLICATE KEY UPDATE weight = VALUES(weight), updated_at = VALUES(updated_at)")
	q.DeleteKeyWeight = p("DELETE FROM {p}key_weights WHERE key_hash = ? AND `key` = ?")
	q.KeyWeights = p("SELECT `key`, weight, updated_at FROM {p}key_weights ORDER BY `key`")

	// Rates: keys by their hash; the rate row alone is locked (the
	// override comes from subqueries). The idle pick skips rows others
	// hold, and the deletes by key go by the primary key (byKey).
	q.Rate = sqlexec.Rates(p, sqlexec.RateSpelling{
		KeyColumns: "key_hash, rate_key",
		Ignore:     " ON DUPLICATE KEY UPDATE rate_key = rate_key",
		Upsert: " ON DUPLICATE KEY UPDATE lim = VALUES(lim), period_ms = VALUES(period_ms)," +
			" updated_at = VALUES(updated_at)",
		Group:   "SUBSTRING_INDEX(rate_key, '/', 1)",
		LineOf:  "b.concurrency_key_hash = " + rateLineHash,
		AdaptOf: "a.key_hash = " + rateLineHash,
		Lock:    " FOR UPDATE",
		TryLock: " FOR UPDATE SKIP LOCKED",
	})
	// The free slots by the key's starts, never by the job index (whose
	// NULLs are every key's free slots).
	q.Rate.Free = p(`SELECT slot FROM {p}rate_starts FORCE INDEX ({p}rate_starts_oldest)
WHERE key_hash = ? AND job_id IS NULL AND started_at <= ? ORDER BY started_at LIMIT ?`)
	q.Rate.PickIdle += " FOR UPDATE SKIP LOCKED"
	q.Rate.DeleteIdle += " ORDER BY key_hash" + byKey
	q.Rate.Due = p(sqlexec.RateDueRead("{p}rate_limits FORCE INDEX ({p}rate_limits_next)"))
	q.Rate.LatestJob = p(`SELECT j.rate_key, j.rate_limit, j.rate_period_ms, ` + sqlexec.LatestJobPolicy + `
FROM {p}jobs j FORCE INDEX ({p}jobs_live_rate)
WHERE j.rate_key_hash = ? AND j.finished_at IS NULL ORDER BY j.id DESC LIMIT 1`)

	// Inspection (read-only).
	// Microseconds since the epoch, as bq stores times: UNIX_TIMESTAMP
	// undoes the session's time zone.
	q.ClockNow = `SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)`
	q.GroupStats = p("SELECT SUBSTRING_INDEX(`key`, '/', 1) AS grp, count(*), min(lim), max(lim),\n" +
		"CAST(sum(lim - value) AS SIGNED), CAST(sum(blocked) AS SIGNED),\n" +
		"CAST(sum(CASE WHEN value <= 0 THEN 1 ELSE 0 END) AS SIGNED)\n" +
		"FROM {p}semaphores GROUP BY grp ORDER BY grp LIMIT ?")
	q.TopBlockedKeys = p("SELECT `key`, value, lim, blocked, multi, duration_ms, expires_at, release_interval_us FROM {p}semaphores\n" +
		"WHERE blocked > 0 ORDER BY blocked DESC, `key` LIMIT ?")
	q.ReadSem = p("SELECT value, lim, blocked, multi, duration_ms, expires_at, release_interval_us FROM {p}semaphores WHERE key_hash = ? AND `key` = ?")
	q.KeyHolders = p(`
SELECT j.id, j.kind, j.queue, c.job_id IS NOT NULL, coalesce(c.process_id, 0), coalesce(p.name, ''),
	p.last_heartbeat_at, c.claimed_at, ` + sqltext.HeldColumn + `
FROM (SELECT x.id FROM {p}jobs x FORCE INDEX ({p}jobs_live_key)
		WHERE x.concurrency_key_hash = ? AND x.concurrency_key = ? AND x.finished_at IS NULL
	UNION SELECT k.job_id FROM {p}job_keys k WHERE k.key_hash = ? AND k.` + "`key`" + ` = ?) h
JOIN {p}jobs j ON j.id = h.id
LEFT JOIN {p}claimed_executions c ON c.job_id = j.id
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE j.finished_at IS NULL
	AND (c.job_id IS NOT NULL OR EXISTS (SELECT 1 FROM {p}ready_executions r WHERE r.job_id = j.id)
		OR ` + sqltext.HeldSlot + `)
ORDER BY j.id LIMIT ?`)
	q.BlockedAhead = p(`SELECT count(*) FROM (SELECT 1 FROM {p}blocked_executions FORCE INDEX ({p}blocked_line)
WHERE concurrency_key_hash = ? AND concurrency_key = ? AND (priority > ? OR (priority = ? AND job_id < ?)) LIMIT ?) ahead`)
	q.BlockedLine = p(`
SELECT b.job_id, j.kind, b.queue, b.priority, b.created_at
FROM {p}blocked_executions b FORCE INDEX ({p}blocked_line) JOIN {p}jobs j ON j.id = b.job_id
WHERE b.concurrency_key_hash = ? AND b.concurrency_key = ? ORDER BY b.priority DESC, b.job_id LIMIT ?`)

	own := &ownQueries{
		// The claim's pick. Args: queue, max.
		pickClaim: p(pickClaim("")),
		// The pick of a claim that reads no gate first: none from a
		// queue with a MaxActive or paused. The subqueries are constants
		// to the optimizer, and take no lock (a locking read locks only
		// the rows of its outer query). Args: queue 3 times, max.
		pickUncapped: p(pickClaim(`
	AND NOT EXISTS (SELECT 1 FROM {p}policies c WHERE c.queue = ? AND ` + sqltext.ClaimedByRule + `)
	AND NOT EXISTS (SELECT 1 FROM {p}paused_queues z WHERE z.queue = ?)`)),
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
		// The key's jobs by concurrency_key and by job_keys (a multi-key
		// job's other keys). Args: key hash, key hash, now, silence,
		// silence.
		lostClaimsOfKey: p(`SELECT c.fence FROM (SELECT x.id FROM {p}jobs x FORCE INDEX ({p}jobs_live_key)
		WHERE x.concurrency_key_hash = ? AND x.finished_at IS NULL
	UNION SELECT k.job_id FROM {p}job_keys k WHERE k.key_hash = ?) h
JOIN {p}jobs j ON j.id = h.id
JOIN {p}claimed_executions c ON c.job_id = j.id
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE j.finished_at IS NULL
	AND (p.id IS NULL OR (` + deadFor(`greatest(?, j.concurrency_duration_ms, 3 * p.heartbeat_interval_ms)`) + `))
ORDER BY c.job_id`),
		lockClaims: p(`SELECT fence FROM {p}claimed_executions WHERE fence IN ` + list + `
ORDER BY fence FOR UPDATE SKIP LOCKED`),
		selectLockedClaims: p(`SELECT ` + sqltext.JobColumns + `, c.fence, c.claimed_at
FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id
WHERE c.fence IN ` + list + ` ORDER BY c.job_id`),

		// Renewal reads the keys the process's claims hold, then locks
		// their semaphores that expire within half their duration,
		// skipping rows someone holds: two renewals never wait on each
		// other, and a skipped key is renewed next beat.
		// A multi-key claim holds each of its keys (job_keys). Args: the
		// process id twice.
		heldKeys: p(`SELECT j.concurrency_key_hash FROM {p}claimed_executions c
JOIN {p}jobs j ON j.id = c.job_id
WHERE c.process_id = ? AND j.concurrency_key_hash IS NOT NULL
UNION SELECT k.key_hash FROM {p}claimed_executions c JOIN {p}job_keys k ON k.job_id = c.job_id
WHERE c.process_id = ?`),
		pickRenewable: p(`SELECT key_hash FROM {p}semaphores
WHERE key_hash IN ` + list + ` AND expires_at < ? + duration_ms * 1000 * ?
ORDER BY key_hash FOR UPDATE SKIP LOCKED`),
		renewSems: p(`UPDATE {p}semaphores SET expires_at = ? + duration_ms * 1000 WHERE key_hash IN ` + list +
			` ORDER BY key_hash` + byKey),

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
	}
	return &q, own
}
