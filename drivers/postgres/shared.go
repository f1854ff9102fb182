package postgres

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/internal/sqltext"
)

// newSharedQueries are sqlexec's shared statements, spelled by p with
// $n placeholders, and PostgreSQL's own where it spells them its way.
func newSharedQueries(p func(string) string) sqlexec.SharedQueries {
	q := sqlexec.SharedStatements(func(s string) string { return sqltext.Rebind(p(s)) })
	q.LockPolicies = p(`SELECT ` + sqltext.PolicyColumns + ` FROM {p}policies
WHERE namespace = $1 OR queue = ANY($2::text[]) ORDER BY queue FOR UPDATE`)
	q.Periodic.Lock = p(`SELECT ` + sqltext.PeriodicColumns + ` FROM {p}periodic_jobs WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE`)
	// Locks the claim: a cancel marking it waits for the run's end.
	q.CancelRequested += " FOR UPDATE"
	// Two finishes of one job cannot both take its edges.
	q.Dependencies.LockDependents += " FOR UPDATE"
	q.Dependencies.LockCancels += " FOR UPDATE"
	q.Inbox = sqlexec.InboxStatements(func(s string) string { return sqltext.Rebind(p(s)) }, sqlexec.InboxSpelling{
		KindIn:     `kind = ANY(?::text[])`,
		Now:        `now()`,
		Before:     `{col} < now() - ? * interval '1 millisecond'`,
		SkipLocked: ` FOR UPDATE SKIP LOCKED`,
	})
	// A ready row carries its job's key and slots (migrations 00027 and
	// 00028), so the head is read from the ready rows alone: probing
	// each row's job cost about two thirds of the read (1.1 of 2.0 ms for
	// 372 rows). The rows are fetched from the heap either way (the
	// line's index is not visible to an index-only scan under churn).
	// The running slots likewise from the claimed rows alone.
	q.ReadyByKey = sqltext.Rebind(p(sqltext.ReadyByKey(sqltext.FairRead{JobsOf: `CROSS JOIN LATERAL (SELECT r.concurrency_key, r.slots) j`,
		WeightOn: `w.key = j.concurrency_key`, NotPaused: keyNotPaused(`{p}ready_executions.job_id`),
		ReadCols: ", concurrency_key, slots", Running: runningByKey})))
	// Each key's first $2 ready jobs (KeyViewParams.PerKey), its keys
	// found by a skip over the ready rows' key index (ready_key,
	// migration 00027): a recursive step a key, then the key's first
	// jobs from the same index, so the read costs the keys and the jobs
	// taken, not the line (a 10,000-row line of 10 keys: 3.1 ms, where
	// the whole line's read took 15.7; a window numbering the rows in
	// one walk of the index took 10.6, its rows fetched from the heap).
	// A paused key is passed over whole; a job paused by a further key
	// of its own is left out as in ReadyByKey.
	q.ReadyPerKey = p(`
WITH RECURSIVE keys AS (
	(SELECT concurrency_key AS k FROM {p}ready_executions WHERE queue = $1 ORDER BY concurrency_key LIMIT 1)
	UNION ALL
	SELECT (SELECT r.concurrency_key FROM {p}ready_executions r WHERE r.queue = $1 AND r.concurrency_key > keys.k
		ORDER BY r.concurrency_key LIMIT 1)
	FROM keys WHERE keys.k IS NOT NULL
)
SELECT 0, x.concurrency_key, x.job_id, j.slots,
	CASE WHEN ` + sqltext.MaxWeight + ` > 0 THEN coalesce((SELECT w.weight FROM {p}key_weights w WHERE w.key = x.concurrency_key), 0) ELSE 0 END,
	` + sqltext.MaxWeight + `, x.priority
FROM keys CROSS JOIN LATERAL (
	SELECT r.job_id, r.priority, r.concurrency_key, r.slots FROM {p}ready_executions r
	WHERE r.queue = $1 AND r.concurrency_key = keys.k AND ` + keyNotPaused(`r.job_id`) + `
	ORDER BY r.priority DESC, r.job_id LIMIT $2) x
CROSS JOIN LATERAL (SELECT x.slots) j
WHERE keys.k IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM {p}paused_keys pk WHERE pk.key = keys.k)
UNION ALL
` + strings.Replace(runningByKey, "?", "$3", 1) + `
ORDER BY 1, 7 DESC, 3`)
	q.CountByQueue = p(sqltext.CountByQueue(func(col string) string { return "sum(" + col + ")::int" }))
	// The time now, not the transaction's start (now()).
	q.ClockNow = `SELECT clock_timestamp()`
	q.GroupStats = p(`
SELECT split_part(key, '/', 1) AS grp, count(*)::int, min(lim), max(lim), sum(lim - value)::int,
	sum(blocked)::int, sum(CASE WHEN value <= 0 THEN 1 ELSE 0 END)::int
FROM {p}semaphores GROUP BY grp ORDER BY grp LIMIT $1`)
	// The key's first-key holders and its multi-key holders (job_keys),
	// each branch walked in id order by its index and cut at max. Args:
	// the key twice ($1, $2), then max ($3).
	q.KeyHolders = p(`
WITH held AS (
	(SELECT j.id FROM {p}jobs j WHERE j.concurrency_key = $1 AND j.finished_at IS NULL AND ` + holding + `
	ORDER BY j.id LIMIT $3)
	UNION
	(SELECT j.id FROM {p}job_keys jk JOIN {p}jobs j ON j.id = jk.job_id
	WHERE jk.key = $2 AND j.finished_at IS NULL AND ` + holding + `
	ORDER BY jk.job_id LIMIT $3)
)
SELECT j.id, j.kind, j.queue, c.job_id IS NOT NULL, coalesce(c.process_id, 0), coalesce(p.name, ''),
	p.last_heartbeat_at, c.claimed_at, ` + sqltext.HeldColumn + `
FROM (SELECT id FROM held ORDER BY id LIMIT $3) h
JOIN {p}jobs j ON j.id = h.id
LEFT JOIN {p}claimed_executions c ON c.job_id = j.id
LEFT JOIN {p}processes p ON p.id = c.process_id
ORDER BY j.id`)
	return q
}

// holding is the condition that job j holds its keys as a holder the
// inspector lists: it is claimed or ready, or a sequence's held job.
const holding = `(EXISTS (SELECT 1 FROM {p}claimed_executions c WHERE c.job_id = j.id)
		OR EXISTS (SELECT 1 FROM {p}ready_executions r WHERE r.job_id = j.id) OR ` + sqltext.HeldSlot + `)`

// conn runs the statements every dialect runs alike (sqlexec.Shared) on
// pgx: times as timestamptz, queues and keys as text, a list of names as
// one text[] argument (the statements spell it = ANY).
type conn struct {
	db dbtx
	q  *queries
}

var _ sqlexec.Conn = conn{}

func (c conn) Write(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.db.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (c conn) Query(ctx context.Context, query string, args ...any) (sqlexec.Rows, error) {
	r, err := c.db.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return rows{r}, nil
}

func (c conn) QueryRow(ctx context.Context, query string, args ...any) sqlexec.Row {
	return c.db.QueryRow(ctx, query, args...)
}

// InsertID reads the id back with RETURNING.
func (c conn) InsertID(ctx context.Context, head string, args ...any) (int64, error) {
	var id int64
	err := c.db.QueryRow(ctx, sqltext.Rebind(head+sqlexec.Values(1, len(args)))+" RETURNING id", args...).Scan(&id)
	return id, err
}

func (conn) Time(t time.Time) any      { return t }
func (conn) Text(s string) any         { return s }
func (conn) KeyArgs(key string) []any  { return []any{key} }
func (conn) CheckKey(key string) error { return checkKey(key) }

// NoTable reports undefined_table.
func (conn) NoTable(err error) bool {
	pgErr := (*pgconn.PgError)(nil)
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}

func (conn) Names(query string, names []string) (string, []any) { return query, []any{names} }

// SearchKeys matches keys with LIKE (history.go).
func (c conn) SearchKeys(prefix, suffix string) (string, any) {
	return c.q.history.searchKeys, driver.LikePattern(prefix, suffix)
}

// rows are pgx's rows as sqlexec reads them.
type rows struct{ pgx.Rows }

func (r rows) Close() error {
	r.Rows.Close()
	return nil
}

// runningByKey is sqltext.RunningByKey summed from the claimed rows
// alone: each carries its job's key and slots (migration 00028).
const runningByKey = `SELECT 1, c.concurrency_key, 0, sum(c.slots), 0, 0, 0
FROM {p}claimed_executions c WHERE c.queue = ? GROUP BY c.concurrency_key`
