package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
)

// lineQueries are the statements of the lines multi-key jobs wait in
// (driver.MultiKeyStore, driver.MultiBatcher).
type lineQueries struct {
	lineHeads, moveToLine                       string
	lineHeadsMany, semTryLockMany, promoteFirst string
}

func newLineQueries(p func(string) string) lineQueries {
	return lineQueries{
		// The first n of key's line, by the blocked_line index, with each
		// job's keys: its first (the jobs columns) and more_keys.
		lineHeads: p(`
SELECT b.job_id, b.queue, b.priority, coalesce(j.concurrency_key, ''), j.concurrency_limit,
	j.concurrency_duration_ms, j.on_conflict, j.max_blocked, j.more_keys, j.slots
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
	j.concurrency_duration_ms, j.on_conflict, j.max_blocked, j.more_keys, j.slots
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
)` + movePicked("$3", false) + `
SELECT concurrency_key, job_id, queue FROM moved ORDER BY priority DESC, job_id`),
	}
}

func (e *executor) LineListHeads(ctx context.Context, key string, n int) ([]driver.LineHead, error) {
	out, err := collect(ctx, e.db, func(r pgx.CollectableRow) (driver.LineHead, error) {
		return scanLineHead(r)
	}, e.q.lineHeads, key, n)
	if err != nil {
		return nil, fmt.Errorf("read the first %d of the line of %q: %w", n, key, err)
	}
	return out, nil
}

// scanLineHead reads a line head's columns (lineHeads), after extra.
func scanLineHead(r pgx.Row, extra ...any) (driver.LineHead, error) {
	var h driver.LineHead
	var j driver.Job
	var durMS int64
	var conflict, slots int16
	var more []byte
	dest := append(extra, &h.JobID, &h.Queue, &h.Priority, &j.Limit.Key, &j.Limit.To, &durMS, &conflict,
		&j.Limit.MaxBlocked, &more, &slots)
	if err := r.Scan(dest...); err != nil {
		return h, err
	}
	j.Limit.Duration = time.Duration(durMS) * time.Millisecond
	j.Limit.OnConflict = driver.OnConflict(conflict)
	var err error
	if j.More, err = driver.DecodeMore(more); err != nil {
		return h, fmt.Errorf("job %d: %w", h.JobID, err)
	}
	h.Keys, h.Slots = j.Keys(), int(slots)
	return h, nil
}

// counts32 is counts as the int[] a statement reads; a negative count is
// none.
func counts32(keys []string, counts []int) ([]int32, error) {
	if len(counts) != len(keys) {
		return nil, fmt.Errorf("%d counts given for %d keys, want one a key", len(counts), len(keys))
	}
	out := make([]int32, len(counts))
	for i, c := range counts {
		out[i] = int32(min(max(c, 0), math.MaxInt32))
	}
	return out, nil
}

// The executor promotes multi-key lines set-wise (package semaphore).
var _ driver.MultiBatcher = (*executor)(nil)

func (e *executor) LineListHeadsMany(ctx context.Context, keys []string, ns []int) ([][]driver.LineHead, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	n, err := counts32(keys, ns)
	if err != nil {
		return nil, fmt.Errorf("read the lines of %d keys: %w", len(keys), err)
	}
	out := make([][]driver.LineHead, len(keys))
	rows, err := e.db.Query(ctx, e.q.lineHeadsMany, keys, n)
	if err != nil {
		return nil, fmt.Errorf("read the lines of %d keys: %w", len(keys), err)
	}
	defer rows.Close()
	for rows.Next() {
		var ord int64
		h, err := scanLineHead(rows, &ord)
		if err != nil {
			return nil, fmt.Errorf("read the lines of %d keys: %w", len(keys), err)
		}
		if ord < 1 || ord > int64(len(keys)) {
			return nil, fmt.Errorf("read the lines of %d keys: a head of key number %d", len(keys), ord)
		}
		out[ord-1] = append(out[ord-1], h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the lines of %d keys: %w", len(keys), err)
	}
	return out, nil
}

func (e *executor) SemaphoreTryLockMany(ctx context.Context, keys []string) ([]driver.Semaphore, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	got, err := collect(ctx, e.db, func(r pgx.CollectableRow) (s driver.Semaphore, err error) {
		var durMS int64
		err = r.Scan(&s.Key, &s.Value, &s.Limit, &s.Blocked, &s.Multi, &durMS, &s.ExpiresAt)
		s.Duration = time.Duration(durMS) * time.Millisecond
		return s, err
	}, e.q.semTryLockMany, keys)
	if err != nil {
		return nil, fmt.Errorf("try to lock %d semaphores: %w", len(keys), err)
	}
	// The database sorts by its collation; the caller's order is keys'.
	byKey := make(map[string]driver.Semaphore, len(got))
	for _, s := range got {
		byKey[s.Key] = s
	}
	out := make([]driver.Semaphore, 0, len(got))
	for _, k := range keys {
		if s, ok := byKey[k]; ok {
			out = append(out, s)
		}
	}
	return out, nil
}

func (e *executor) LinePromoteFirst(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	n, err := counts32(keys, counts)
	if err != nil {
		return nil, fmt.Errorf("promote blocked jobs of %d keys: %w", len(keys), err)
	}
	at := make(map[string]int, len(keys))
	for i, k := range keys {
		at[k] = i
	}
	out := make([]driver.Promotion, len(keys))
	rows, err := e.db.Query(ctx, e.q.promoteFirst, keys, n, now)
	if err != nil {
		return nil, fmt.Errorf("promote blocked jobs of %d keys: %w", len(keys), err)
	}
	var key, queue string
	var id int64
	// Rows come in promotion order, so each key's JobIDs are in its own.
	_, err = pgx.ForEachRow(rows, []any{&key, &id, &queue}, func() error {
		i, ok := at[key]
		if !ok {
			return fmt.Errorf("job %d moved from the line of %q, a key not asked for", id, key)
		}
		p := &out[i]
		p.Jobs++
		p.AddQueue(queue)
		p.JobIDs = append(p.JobIDs, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("promote blocked jobs of %d keys: %w", len(keys), err)
	}
	return out, nil
}

// LineMove runs at once, not queued: whether a row moved is its answer.
func (e *executor) LineMove(ctx context.Context, id int64, from, to string) error {
	if err := checkKey(to); err != nil {
		return fmt.Errorf("move job %d to another line: %w", id, err)
	}
	tag, err := e.db.Exec(ctx, e.q.moveToLine, id, from, to)
	if err != nil {
		return fmt.Errorf("move job %d from the line of %q to that of %q: %w", id, from, to, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("move job %d from the line of %q to that of %q: it is not blocked in the line of %q", id, from, to, from)
	}
	return nil
}
