package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/internal/sqltext"
)

// rateQueries are the rate keys' statements (driver.RateStore).
type rateQueries struct {
	ensure, ring, lock, tryLock, save, grow, shrink, free, setSlots, cancelReservation                    string
	reserved, unstamp, lockRow                                                                            string
	repair, oldest, due, next, deleteIdle, setOverride, deleteOverride, latestJob, read, list, blockedKey string
	groups, strays                                                                                        string
}

// rateLine is driver.RateLinePrefix as an SQL literal's text.
const rateLine = driver.RateLinePrefix

// rateColumns are a rate row's (r), its override's (o) and its adaptive
// limit's (the key_adapt row of its line key, read by a subquery, which
// FOR UPDATE OF r does not lock).
const rateColumns = `r.rate_key, r.lim, r.period_ms, r.waiting, r.next_at,
	coalesce(o.lim, 0), coalesce(o.period_ms, 0),
	coalesce((SELECT a.lim FROM {p}key_adapt a WHERE a.key = '` + rateLine + `' || r.rate_key), 0)`

func newRateQueries(p func(string) string) rateQueries {
	read := `SELECT ` + rateColumns + ` FROM {p}rate_limits r
LEFT JOIN {p}rate_overrides o ON o.rate_key = r.rate_key WHERE r.rate_key = $1`
	return rateQueries{
		ensure: p(`INSERT INTO {p}rate_limits (rate_key, lim, period_ms, updated_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (rate_key) DO NOTHING`),
		ring: p(`INSERT INTO {p}rate_starts (rate_key, slot, started_at)
SELECT $1, s, 'epoch'::timestamptz FROM generate_series(0, $2 - 1) AS s`),
		lock:    p(read + ` FOR UPDATE OF r`),
		lockRow: p(`SELECT 1 FROM {p}rate_limits WHERE rate_key = $1 FOR UPDATE`),
		tryLock: p(read + ` FOR UPDATE OF r SKIP LOCKED`),
		save: p(`UPDATE {p}rate_limits SET lim = $2, period_ms = $3, waiting = $4, next_at = $5, updated_at = $6
WHERE rate_key = $1`),
		grow: p(`INSERT INTO {p}rate_starts (rate_key, slot, started_at)
SELECT $1, m.top + s, 'epoch'::timestamptz
FROM (SELECT coalesce(max(slot), -1) + 1 AS top FROM {p}rate_starts WHERE rate_key = $1) m,
	generate_series(0, $2 - 1) AS s`),
		shrink: p(`DELETE FROM {p}rate_starts WHERE rate_key = $1 AND slot IN (
	SELECT slot FROM {p}rate_starts WHERE rate_key = $1 ORDER BY started_at, slot LIMIT $2)`),
		free: p(`SELECT slot FROM {p}rate_starts WHERE rate_key = $1 AND job_id IS NULL AND started_at <= $2
ORDER BY started_at LIMIT $3`),
		setSlots: p(`UPDATE {p}rate_starts s SET started_at = $4, job_id = NULLIF(t.job_id, 0)
FROM unnest($2::int[], $3::bigint[]) AS t(slot, job_id)
WHERE s.rate_key = $1 AND s.slot = t.slot`),
		unstamp: p(`UPDATE {p}rate_starts SET started_at = $4
WHERE rate_key = $1 AND slot = $2 AND started_at = $3 AND job_id IS NULL`),
		reserved: p(`SELECT job_id, slot FROM {p}rate_starts WHERE rate_key = $1 AND job_id = ANY($2::bigint[])`),
		cancelReservation: p(`UPDATE {p}rate_starts SET started_at = 'epoch'::timestamptz, job_id = NULL
WHERE job_id = $2 AND rate_key = $1`),
		repair: p(`UPDATE {p}rate_starts s SET started_at = 'epoch'::timestamptz, job_id = NULL
WHERE s.rate_key = $1 AND s.job_id IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM {p}ready_executions x WHERE x.job_id = s.job_id)
	AND NOT EXISTS (SELECT 1 FROM {p}claimed_executions x WHERE x.job_id = s.job_id)`),
		oldest: p(`SELECT started_at FROM {p}rate_starts WHERE rate_key = $1 AND NOT slot = ANY($2::int[])
ORDER BY started_at LIMIT 1`),
		due:  sqltext.Rebind(p(sqlexec.RateDueRead("{p}rate_limits"))),
		next: p(`SELECT next_at FROM {p}rate_limits WHERE next_at IS NOT NULL AND waiting > 0 ORDER BY next_at LIMIT 1`),
		deleteIdle: p(`
WITH idle AS (
	SELECT r.rate_key FROM {p}rate_limits r
	WHERE r.waiting = 0 AND NOT EXISTS (
		SELECT 1 FROM {p}rate_starts s WHERE s.rate_key = r.rate_key
			AND (s.job_id IS NOT NULL OR s.started_at > $1::timestamptz - r.period_ms * interval '1 millisecond'))
		AND NOT EXISTS (SELECT 1 FROM {p}blocked_executions b WHERE b.concurrency_key = '` + rateLine + `' || r.rate_key)
	ORDER BY r.rate_key LIMIT $2
	FOR UPDATE OF r SKIP LOCKED
), ring AS (
	DELETE FROM {p}rate_starts s USING idle WHERE s.rate_key = idle.rate_key
)
DELETE FROM {p}rate_limits r USING idle WHERE r.rate_key = idle.rate_key`),
		setOverride: p(`INSERT INTO {p}rate_overrides (rate_key, lim, period_ms, updated_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (rate_key) DO UPDATE SET lim = EXCLUDED.lim, period_ms = EXCLUDED.period_ms, updated_at = EXCLUDED.updated_at`),
		deleteOverride: p(`DELETE FROM {p}rate_overrides WHERE rate_key = $1`),
		latestJob: p(`SELECT j.rate_limit, j.rate_period_ms,
	coalesce((SELECT p.max_starts_per_key FROM {p}policies p WHERE p.queue = j.queue), 0),
	coalesce((SELECT p.starts_period_ms FROM {p}policies p WHERE p.queue = j.queue), 0)
FROM {p}jobs j WHERE j.rate_key = $1 AND j.finished_at IS NULL ORDER BY j.id DESC LIMIT 1`),
		read: p(`SELECT ` + rateColumns + `,
	(SELECT count(*) FROM {p}rate_starts s WHERE s.rate_key = r.rate_key AND s.job_id IS NULL AND s.started_at > $2)
FROM {p}rate_limits r LEFT JOIN {p}rate_overrides o ON o.rate_key = r.rate_key WHERE r.rate_key = $1`),
		list: p(`SELECT ` + rateColumns + ` FROM {p}rate_limits r
LEFT JOIN {p}rate_overrides o ON o.rate_key = r.rate_key WHERE r.rate_key > $1 ORDER BY r.rate_key LIMIT $2`),
		strays: p(`SELECT r.rate_key FROM {p}rate_limits r
WHERE r.waiting = 0 AND EXISTS (SELECT 1 FROM {p}blocked_executions b WHERE b.concurrency_key = '` + rateLine + `' || r.rate_key)
ORDER BY r.rate_key LIMIT $1`),
		groups: p(`SELECT split_part(rate_key, '/', 1) AS grp, count(*)::int, coalesce(sum(waiting), 0)::int,
	(count(*) FILTER (WHERE waiting > 0))::int
FROM {p}rate_limits GROUP BY grp ORDER BY grp LIMIT $1`),
		blockedKey: p(`SELECT concurrency_key FROM {p}blocked_executions WHERE job_id = $1`),
	}
}

func scanRate(row pgx.Row, extra ...any) (driver.Rate, error) {
	var r driver.Rate
	var periodMS, overrideMS int64
	var next *time.Time
	err := row.Scan(append([]any{&r.Key, &r.Limit, &periodMS, &r.Waiting, &next, &r.Override.Limit, &overrideMS, &r.Adapt}, extra...)...)
	r.Period = time.Duration(periodMS) * time.Millisecond
	if next != nil {
		r.NextAt = *next
	}
	if r.Override.Limit > 0 {
		r.Override.Key, r.Override.Period = r.Key, time.Duration(overrideMS)*time.Millisecond
	}
	return r, err
}

func (e *executor) RateEnsure(ctx context.Context, spec driver.RateSpec, now time.Time) error {
	if err := checkKey(spec.Key); err != nil {
		return fmt.Errorf("create rate row: %w", err)
	}
	tag, err := e.db.Exec(ctx, e.q.rate.ensure, spec.Key, spec.Limit, spec.Period.Milliseconds(), now)
	if err != nil {
		return fmt.Errorf("create rate row %q: %w", spec.Key, err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	if err := e.write(ctx, e.q.rate.ring, spec.Key, spec.Limit); err != nil {
		return fmt.Errorf("create the start ring of rate key %q: %w", spec.Key, err)
	}
	return nil
}

// RateLock locks the key's row in a statement of its own (queued with
// the read in bq's pipelined transaction), then reads it with its
// override and adaptive limit, as the transaction it may have waited for
// left them (see SemaphoreLock).
func (e *executor) RateLock(ctx context.Context, key string) (driver.Rate, bool, error) {
	if err := e.write(ctx, e.q.rate.lockRow, key); err != nil {
		return driver.Rate{}, false, fmt.Errorf("lock rate key %q: %w", key, err)
	}
	return e.rateLock(ctx, e.q.rate.lock, key)
}

func (e *executor) RateTryLock(ctx context.Context, key string) (driver.Rate, bool, error) {
	return e.rateLock(ctx, e.q.rate.tryLock, key)
}

// rateLock reads key's row with query, a locking read.
func (e *executor) rateLock(ctx context.Context, query, key string) (driver.Rate, bool, error) {
	r, err := scanRate(e.db.QueryRow(ctx, query, key))
	ok, err := found(err)
	if err != nil {
		return r, false, fmt.Errorf("lock rate key %q: %w", key, err)
	}
	return r, ok, nil
}

func (e *executor) RateSave(ctx context.Context, r driver.Rate, now time.Time) error {
	var next *time.Time
	if !r.NextAt.IsZero() {
		next = &r.NextAt
	}
	if err := e.write(ctx, e.q.rate.save, r.Key, r.Limit, r.Period.Milliseconds(), r.Waiting, next, now); err != nil {
		return fmt.Errorf("save rate key %q: %w", r.Key, err)
	}
	return nil
}

func (e *executor) RateResizeRing(ctx context.Context, key string, from, to int) error {
	var err error
	switch {
	case to > from:
		err = e.write(ctx, e.q.rate.grow, key, to-from)
	case to < from:
		err = e.write(ctx, e.q.rate.shrink, key, from-to)
	}
	if err != nil {
		return fmt.Errorf("resize the start ring of rate key %q from %d to %d: %w", key, from, to, err)
	}
	return nil
}

func (e *executor) RateSlotListFree(ctx context.Context, key string, notAfter time.Time, max int) ([]int, error) {
	if max <= 0 {
		return nil, nil
	}
	slots, err := collect(ctx, e.db, pgx.RowTo[int], e.q.rate.free, key, notAfter, max)
	if err != nil {
		return nil, fmt.Errorf("read free start slots of rate key %q: %w", key, err)
	}
	return slots, nil
}

func (e *executor) RateSlotSetMany(ctx context.Context, p driver.RateSlotsParams) error {
	key, slots, jobIDs, at := p.Key, p.Slots, p.JobIDs, p.At
	if len(slots) == 0 {
		return nil
	}
	s := make([]int32, len(slots))
	for i, v := range slots {
		s[i] = int32(v)
	}
	if err := e.write(ctx, e.q.rate.setSlots, key, s, jobIDs, at); err != nil {
		return fmt.Errorf("write start slots of rate key %q: %w", key, err)
	}
	return nil
}

func (e *executor) RateSlotUnstamp(ctx context.Context, p driver.RateUnstampParams) (bool, error) {
	key, slot, stamped, to := p.Key, p.Slot, p.Stamped, p.To
	tag, err := e.db.Exec(ctx, e.q.rate.unstamp, key, slot, stamped, to)
	if err != nil {
		return false, fmt.Errorf("give back slot %d of rate key %q: %w", slot, key, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) RateSlotListReserved(ctx context.Context, key string, jobIDs []int64) (map[int64]int, error) {
	type pair struct {
		Job  int64
		Slot int
	}
	pairs, err := collect(ctx, e.db, pgx.RowToStructByPos[pair], e.q.rate.reserved, key, jobIDs)
	if err != nil {
		return nil, fmt.Errorf("read the reservations of rate key %q: %w", key, err)
	}
	out := make(map[int64]int, len(pairs))
	for _, p := range pairs {
		out[p.Job] = p.Slot
	}
	return out, nil
}

func (e *executor) RateSlotCancelReservation(ctx context.Context, key string, jobID int64) error {
	if err := e.write(ctx, e.q.rate.cancelReservation, key, jobID); err != nil {
		return fmt.Errorf("free the slot of rate key %q reserved for job %d: %w", key, jobID, err)
	}
	return nil
}

func (e *executor) RateSlotRepairReservations(ctx context.Context, key string) (int, error) {
	tag, err := e.db.Exec(ctx, e.q.rate.repair, key)
	if err != nil {
		return 0, fmt.Errorf("repair the reservations of rate key %q: %w", key, err)
	}
	return int(tag.RowsAffected()), nil
}

func (e *executor) RateSlotGetOldest(ctx context.Context, key string, except []int) (time.Time, error) {
	skip := make([]int32, len(except))
	for i, v := range except {
		skip[i] = int32(v)
	}
	var at time.Time
	ok, err := found(e.db.QueryRow(ctx, e.q.rate.oldest, key, skip).Scan(&at))
	if err != nil {
		return at, fmt.Errorf("read the oldest start of rate key %q: %w", key, err)
	}
	if !ok {
		return driver.Reserved, nil
	}
	return at, nil
}

func (e *executor) RateListDue(ctx context.Context, now time.Time, max int) (driver.RateDue, error) {
	var due driver.RateDue
	type row struct {
		Key *string
		At  *time.Time
	}
	rows, err := collect(ctx, e.db, pgx.RowToStructByPos[row], e.q.rate.due, now, max, now)
	if err != nil {
		return due, fmt.Errorf("read due rate keys: %w", err)
	}
	for _, r := range rows {
		due.Add(r.Key, r.At)
	}
	return due, nil
}

func (e *executor) RateNextAt(ctx context.Context) (time.Time, bool, error) {
	var at time.Time
	ok, err := found(e.db.QueryRow(ctx, e.q.rate.next).Scan(&at))
	if err != nil {
		return at, false, fmt.Errorf("read the next rate start: %w", err)
	}
	return at, ok, nil
}

func (e *executor) RateDeleteIdle(ctx context.Context, now time.Time, max int) (int, error) {
	tag, err := e.db.Exec(ctx, e.q.rate.deleteIdle, now, max)
	if err != nil {
		return 0, fmt.Errorf("delete idle rate keys: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func (e *executor) KeyRateSet(ctx context.Context, spec driver.RateSpec, now time.Time) error {
	if err := checkKey(spec.Key); err != nil {
		return fmt.Errorf("set key rate: %w", err)
	}
	if _, err := e.db.Exec(ctx, e.q.rate.setOverride, spec.Key, spec.Limit, spec.Period.Milliseconds(), now); err != nil {
		return fmt.Errorf("set the rate of key %q: %w", spec.Key, err)
	}
	return nil
}

func (e *executor) KeyRateDelete(ctx context.Context, key string) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.rate.deleteOverride, key)
	if err != nil {
		return false, fmt.Errorf("clear the rate of key %q: %w", key, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) JobRateGetLatest(ctx context.Context, key string) (driver.RateSpec, bool, error) {
	spec := driver.RateSpec{Key: key}
	var periodMS, policyMS int64
	var policyLimit int
	ok, err := found(e.db.QueryRow(ctx, e.q.rate.latestJob, key).Scan(&spec.Limit, &periodMS, &policyLimit, &policyMS))
	if err != nil {
		return spec, false, fmt.Errorf("read the rate of key %q's newest job: %w", key, err)
	}
	if spec.Limit == 0 {
		spec.Limit, periodMS = policyLimit, policyMS
	}
	spec.Period = time.Duration(periodMS) * time.Millisecond
	return spec, ok, nil
}

func (e *executor) RateGet(ctx context.Context, key string, since time.Time) (driver.Rate, int, bool, error) {
	var recent int
	r, err := scanRate(e.db.QueryRow(ctx, e.q.rate.read, key, since), &recent)
	ok, err := found(err)
	if err != nil {
		return r, 0, false, fmt.Errorf("read rate key %q: %w", key, err)
	}
	return r, recent, ok, nil
}

func (e *executor) RateList(ctx context.Context, after string, max int) ([]driver.Rate, error) {
	out, err := collect(ctx, e.db, func(row pgx.CollectableRow) (driver.Rate, error) { return scanRate(row) },
		e.q.rate.list, after, max)
	if err != nil {
		return nil, fmt.Errorf("list rate keys: %w", err)
	}
	return out, nil
}

func (e *executor) LineGetKey(ctx context.Context, jobID int64) (string, bool, error) {
	var key string
	ok, err := found(e.db.QueryRow(ctx, e.q.rate.blockedKey, jobID).Scan(&key))
	if err != nil {
		return "", false, fmt.Errorf("read the line of blocked job %d: %w", jobID, err)
	}
	return key, ok, nil
}

func (e *executor) RateListGroups(ctx context.Context, max int) ([]driver.RateGroupStats, error) {
	out, err := collect(ctx, e.db, pgx.RowToStructByPos[driver.RateGroupStats], e.q.rate.groups, max)
	if err != nil {
		return nil, fmt.Errorf("sum rate keys by group: %w", err)
	}
	return out, nil
}

func (e *executor) RateListStrayLines(ctx context.Context, max int) ([]string, error) {
	keys, err := collect(ctx, e.db, pgx.RowTo[string], e.q.rate.strays, max)
	if err != nil {
		return nil, fmt.Errorf("find rate lines counted empty: %w", err)
	}
	return keys, nil
}
