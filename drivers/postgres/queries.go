package postgres

import (
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/internal/sqltext"
)

// queries holds every statement with the table prefix spliced in once.
type queries struct {
	// SharedQueries are those of sqlexec.Shared (shared.go).
	sqlexec.SharedQueries

	jobQueries       // jobs.go
	claimQueries     // claims.go
	semaphoreQueries // semaphores.go
	lineQueries      // multikey.go
	admitQueries     // admit.go

	// processes.go
	heartbeat, renewSems, deleteDeadProcesses string

	// policies.go
	policyKeys, latestJobLimit string

	// cancel.go
	cancelJob, markCancel string

	history historyQueries // history.go
	unique  uniqueQueries  // unique.go
	rate    rateQueries    // rate.go

	// spell splices the prefix into statements built at run time (list.go).
	spell func(string) string
}

const jobColumns = sqltext.JobColumns

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
		SharedQueries:    newSharedQueries(p),
		jobQueries:       newJobQueries(p),
		claimQueries:     newClaimQueries(p),
		semaphoreQueries: newSemaphoreQueries(p),
		lineQueries:      newLineQueries(p),
		admitQueries:     newAdmitQueries(p),
		spell:            p,

		// The process rows, the policies and the cancel: what PostgreSQL
		// spells its own way beside sqlexec.Shared's.
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
