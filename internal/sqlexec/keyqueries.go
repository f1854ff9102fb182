package sqlexec

import (
	"strings"

	"github.com/bqueue/bq/internal/sqltext"
)

// KeySpelling is how a dialect's statements find the rows of a key (its
// KeyIndex): MySQL by the SHA-256 columns its indexes hold, naming the
// index where its optimizer would take another.
type KeySpelling struct {
	// Column and JobKeysColumn are the columns matched on a key's
	// KeyIndex: of jobs and blocked_executions ("concurrency_key" or
	// "concurrency_key_hash"), and of job_keys ("key" or "key_hash").
	Column, JobKeysColumn string
	// JobsIndex and LineIndex follow the tables read by a key, jobs
	// and blocked_executions (after their aliases): "" or an index hint.
	JobsIndex, LineIndex string
	// InRateLine is the condition that blocked row b waits in a rate
	// line, where a job keeps the slots of its keys.
	InRateLine string
}

// keyStatements spells the statements that read a key's rows, through p.
func keyStatements(p func(string) string, k KeySpelling) (countHolders, lineHeads, latestJobLimit, latestMultiJob string) {
	r := strings.NewReplacer("{key}", k.Column, "{jk}", k.JobKeysColumn, "{jobs}", "{p}jobs j"+k.JobsIndex,
		"{line}", "{p}blocked_executions"+k.LineIndex, "{line b}", "{p}blocked_executions b"+k.LineIndex, "{rateLine}", k.InRateLine)
	s := func(q string) string { return p(r.Replace(q)) }
	// A job holds the key by its concurrency_key or, a multi-key job, by
	// a job_keys row (counted there only when its concurrency_key is
	// another key, so each job once); blocked, it holds only in a rate
	// line; scheduled or failed, only as a sequence's held job (HeldSlot).
	// A job counts its slots (jobs.slots); the last count is of the blocked
	// jobs promoted head by head (driver.HeadByHead).
	// Args: the key's KeyIndex eight times.
	countHolders = s(`
SELECT
	coalesce((SELECT sum(j.slots) FROM {jobs} JOIN {p}ready_executions r ON r.job_id = j.id
		WHERE j.{key} = ? AND j.finished_at IS NULL), 0)
	+ coalesce((SELECT sum(j.slots) FROM {jobs} JOIN {p}claimed_executions c ON c.job_id = j.id
		WHERE j.{key} = ? AND j.finished_at IS NULL), 0)
	+ coalesce((SELECT sum(j.slots) FROM {jobs} JOIN {p}blocked_executions b ON b.job_id = j.id
		WHERE j.{key} = ? AND j.finished_at IS NULL AND {rateLine}), 0)
	+ coalesce((SELECT sum(j.slots) FROM {jobs} WHERE j.{key} = ? AND j.finished_at IS NULL AND ` + sqltext.HeldSlot + `), 0)
	+ coalesce((SELECT sum(j.slots) FROM {p}job_keys k JOIN {p}jobs j ON j.id = k.job_id
		WHERE k.{jk} = ? AND j.{key} <> ? AND j.finished_at IS NULL
		AND (EXISTS (SELECT 1 FROM {p}ready_executions r WHERE r.job_id = j.id)
			OR EXISTS (SELECT 1 FROM {p}claimed_executions c WHERE c.job_id = j.id)
			OR EXISTS (SELECT 1 FROM {p}blocked_executions b WHERE b.job_id = j.id AND {rateLine}))), 0),
	(SELECT count(*) FROM {line} WHERE {key} = ?),
	(SELECT count(*) FROM {line b} JOIN {p}jobs j ON j.id = b.job_id
		WHERE b.{key} = ? AND (j.more_keys IS NOT NULL OR j.slots > 1))`)
	// The head of a line by its index, however long the line.
	lineHeads = s(`SELECT b.job_id, b.queue, b.priority, coalesce(j.concurrency_key, ''), j.concurrency_limit,
	j.concurrency_duration_ms, j.on_conflict, j.max_blocked, j.more_keys, j.slots
FROM {line b} JOIN {p}jobs j ON j.id = b.job_id
WHERE b.{key} = ? ORDER BY b.priority DESC, b.job_id LIMIT ?`)
	latestJobLimit = s(`SELECT ` + sqltext.JobColumns + ` FROM {jobs}
WHERE j.{key} = ? AND j.finished_at IS NULL ORDER BY j.id DESC LIMIT 1`)
	latestMultiJob = s(`SELECT ` + sqltext.JobColumns + ` FROM {p}jobs j WHERE j.id = (SELECT max(jk.job_id)
FROM {p}job_keys jk JOIN {p}jobs k ON k.id = jk.job_id WHERE jk.{jk} = ? AND k.finished_at IS NULL)`)
	return countHolders, lineHeads, latestJobLimit, latestMultiJob
}
