package mysql

import (
	"strconv"
	"strings"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/internal/sqltext"
)

// The spelling helpers of MySQL's statements (queries.go): id lists,
// the locking read of a claim, the paused-key and dead-process
// conditions.

const list = sqlexec.ListMarker

// inRateLine is the condition that blocked row b waits in a rate line,
// where a job keeps the slots of its keys.
var inRateLine = "LEFT(b.concurrency_key, " + strconv.Itoa(len(driver.RateLinePrefix)) + ") = '" + driver.RateLinePrefix + "'"

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

// pickClaim is the locking read of a claim: the queue's first ready rows
// by the poll index, each joined to its job by the primary key and
// locked with it, on condition (the queue is the first argument, the
// row count the last). STRAIGHT_JOIN and both FORCE INDEXes pin that
// plan: the index's order is the scan's, which stops after the rows it
// returns. Left to itself, the optimizer may join a small jobs table by
// a scan into a join buffer, sort, and lock every job.
func pickClaim(condition string) string {
	return `SELECT ` + sqltext.JobColumns + `
FROM {p}ready_executions r FORCE INDEX ({p}ready_poll)
STRAIGHT_JOIN {p}jobs j FORCE INDEX (PRIMARY) ON j.id = r.job_id
WHERE r.queue = ?` + condition + ` AND ` + keyNotPaused(`r.job_id`) + `
ORDER BY r.priority DESC, r.job_id LIMIT ? FOR UPDATE SKIP LOCKED`
}

// emptyKeyHash is the hash a keyless job's ready row carries in a
// fair-share queue (FillReadyKeys): that of the empty key, the one fair
// share gives such jobs.
const emptyKeyHash = `UNHEX(SHA2('', 256))`

// keyNotPaused is sqltext.KeyNotPaused as MySQL spells it: keys matched
// by their hash, then byte for byte.
func keyNotPaused(id string) string {
	return sqltext.KeyNotPaused(id, "pk.key_hash = pj.concurrency_key_hash AND pk.`key` = pj.concurrency_key",
		"pk.key_hash = jk.key_hash AND pk.`key` = jk.`key`")
}

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
