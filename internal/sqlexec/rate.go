package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// RateQueries are the rate limits' statements (driver.RateStore). A key
// is matched on its indexed column (KeyIndex: SQLite's rate_key, MySQL's
// key_hash) and stored with its KeyArgs.
type RateQueries struct {
	// Ensure inserts a key's row, affecting no row when it exists; Slots
	// is the head of a multi-row INSERT of ring slots (key index, slot,
	// started_at), up to VALUES.
	Ensure, Slots string
	// Lock reads a key's row and override, locking the row where the
	// dialect has row locks; TryLock skips a row another transaction
	// holds; Read locks nothing and also counts the ring's recent starts.
	Lock, TryLock, Read, Save string
	// LockRow locks a key's row alone, before Lock reads it (empty where
	// the transaction's write lock is the lock).
	LockRow                                            string
	MaxSlot, Oldest, DropSlots, Free, SetSlot          string
	Reserved, Unstamp                                  string
	CancelReservation, Repair, OldestSlot, Due, NextAt string
	// SetSlotsHead and SetSlotsTail frame one UPDATE of many slots: a
	// WHEN slot THEN job_id per slot goes between them.
	SetSlotsHead, SetSlotsTail                               string
	PickIdle, DeleteIdle, DeleteRings                        string
	SetOverride, DeleteOverride, LatestJob, List, BlockedKey string
	Groups, Strays                                           string
}

// LatestJobPolicy are the columns of LatestJob that read the rate of the
// policy of job j's queue, 0 when none.
const LatestJobPolicy = `coalesce((SELECT p.max_starts_per_key FROM {p}policies p WHERE p.queue = j.queue), 0),
	coalesce((SELECT p.starts_period_ms FROM {p}policies p WHERE p.queue = j.queue), 0)`

// RateSpelling is what a dialect spells its own way in the rate
// statements.
type RateSpelling struct {
	// KeyColumns are the columns a key is stored in, the indexed one
	// first, as KeyArgs passes them: "rate_key" or "key_hash, rate_key".
	KeyColumns string
	// Ignore ends an INSERT that affects no row when the key exists;
	// Upsert one that sets lim, period_ms and updated_at from the new row.
	Ignore, Upsert string
	// Group is the expression of a rate_key's group (before its first "/").
	Group string
	// LineOf matches the blocked rows b of the line of rate row {t};
	// AdaptOf the key_adapt row a of its line key (its adaptive limit).
	LineOf, AdaptOf string
	// Lock and TryLock end the locking reads of a key's row ("" where the
	// transaction's write lock is the lock).
	Lock, TryLock string
}

// rateColumns are a rate row's columns (aliased r), its override's and
// its adaptive limit's (adaptOf matches its key_adapt row a), in
// scanning order. Both come from subqueries, which a locking read does
// not lock: only the rate row is.
func rateColumns(k, adaptOf string) string {
	return `r.lim, r.period_ms, r.waiting, r.next_at,
	(SELECT o.lim FROM {p}rate_overrides o WHERE o.` + k + ` = r.` + k + `),
	(SELECT o.period_ms FROM {p}rate_overrides o WHERE o.` + k + ` = r.` + k + `),
	coalesce((SELECT a.lim FROM {p}key_adapt a WHERE ` + adaptOf + `), 0)`
}

// Rates spells the rate statements, each passed through p (see
// sqltext.Spelling); s is what the dialect spells its own way.
func Rates(p func(string) string, s RateSpelling) RateQueries {
	k := strings.TrimSpace(strings.Split(s.KeyColumns, ",")[0])
	marks := strings.TrimSuffix(strings.Repeat("?, ", strings.Count(s.KeyColumns, ",")+1), ", ")
	cols := rateColumns(k, strings.ReplaceAll(s.AdaptOf, "{t}", "r"))
	// The key's ring holds nothing a new one would not: no reservation
	// and no start within the period before ? (now).
	// lineOf matches the blocked rows of t's line.
	lineOf := func(t string) string { return strings.ReplaceAll(s.LineOf, "{t}", t) }
	idle := func(t string) string {
		return t + `.waiting = 0 AND NOT EXISTS (SELECT 1 FROM {p}rate_starts s WHERE s.` + k + ` = ` + t + `.` + k + `
	AND (s.job_id IS NOT NULL OR s.started_at > ? - ` + t + `.period_ms * 1000))
	AND NOT EXISTS (SELECT 1 FROM {p}blocked_executions b WHERE ` + lineOf(t) + `)`
	}
	return RateQueries{
		Ensure: p(`INSERT INTO {p}rate_limits (` + s.KeyColumns + `, lim, period_ms, waiting, next_at, updated_at)
VALUES (` + marks + `, ?, ?, 0, NULL, ?)` + s.Ignore),
		Slots:   p(`INSERT INTO {p}rate_starts (` + k + `, slot, started_at) VALUES `),
		Lock:    p(`SELECT ` + cols + ` FROM {p}rate_limits r WHERE r.` + k + ` = ?` + s.Lock),
		LockRow: lockRow(p(`SELECT 1 FROM {p}rate_limits WHERE `+k+` = ?`), s.Lock),
		TryLock: p(`SELECT ` + cols + ` FROM {p}rate_limits r WHERE r.` + k + ` = ?` + s.TryLock),
		// Args: since, key.
		Read: p(`SELECT ` + cols + `,
	(SELECT count(*) FROM {p}rate_starts s WHERE s.` + k + ` = r.` + k + ` AND s.job_id IS NULL AND s.started_at > ?)
FROM {p}rate_limits r WHERE r.` + k + ` = ?`),
		Save: p(`UPDATE {p}rate_limits SET lim = ?, period_ms = ?, waiting = ?, next_at = ?, updated_at = ?
WHERE ` + k + ` = ?`),
		MaxSlot: p(`SELECT coalesce(max(slot), -1) FROM {p}rate_starts WHERE ` + k + ` = ?`),
		// Reservations carry driver.Reserved, the latest instant: they go last.
		Oldest:    p(`SELECT slot FROM {p}rate_starts WHERE ` + k + ` = ? ORDER BY started_at, slot LIMIT ?`),
		DropSlots: p(`DELETE FROM {p}rate_starts WHERE ` + k + ` = ? AND slot IN ` + ListMarker),
		Free: p(`SELECT slot FROM {p}rate_starts WHERE ` + k + ` = ? AND job_id IS NULL AND started_at <= ?
ORDER BY started_at LIMIT ?`),
		Unstamp: p(`UPDATE {p}rate_starts SET started_at = ?
WHERE ` + k + ` = ? AND slot = ? AND started_at = ? AND job_id IS NULL`),
		SetSlot:           p(`UPDATE {p}rate_starts SET started_at = ?, job_id = ? WHERE ` + k + ` = ? AND slot = ?`),
		Reserved:          p(`SELECT job_id, slot FROM {p}rate_starts WHERE ` + k + ` = ? AND job_id IN ` + ListMarker),
		CancelReservation: p(`UPDATE {p}rate_starts SET started_at = 0, job_id = NULL WHERE ` + k + ` = ? AND job_id = ?`),
		Repair: p(`UPDATE {p}rate_starts SET started_at = 0, job_id = NULL
WHERE ` + k + ` = ? AND job_id IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM {p}ready_executions r WHERE r.job_id = {p}rate_starts.job_id)
	AND NOT EXISTS (SELECT 1 FROM {p}claimed_executions c WHERE c.job_id = {p}rate_starts.job_id)`),
		// The oldest few, by the (key, started_at) index: the caller skips
		// the ones it leaves out.
		OldestSlot:   p(`SELECT slot, started_at FROM {p}rate_starts WHERE ` + k + ` = ? ORDER BY started_at LIMIT ?`),
		SetSlotsHead: p(`UPDATE {p}rate_starts SET started_at = ?, job_id = CASE slot`),
		SetSlotsTail: p(` ELSE job_id END WHERE ` + k + ` = ? AND slot IN ` + ListMarker),
		Due:          p(RateDueRead("{p}rate_limits")),
		NextAt:       p(`SELECT min(next_at) FROM {p}rate_limits WHERE next_at IS NOT NULL AND waiting > 0`),
		// Args: now, max. The pick locks what it returns where there are
		// row locks (a dialect appends its SKIP LOCKED); the deletes check
		// idleness again under those locks (args: now, then the keys).
		PickIdle:   p(`SELECT r.` + k + ` FROM {p}rate_limits r WHERE ` + idle("r") + ` ORDER BY r.` + k + ` LIMIT ?`),
		DeleteIdle: p(`DELETE FROM {p}rate_limits WHERE ` + idle("{p}rate_limits") + ` AND ` + k + ` IN ` + ListMarker),
		DeleteRings: p(`DELETE FROM {p}rate_starts
WHERE NOT EXISTS (SELECT 1 FROM {p}rate_limits r WHERE r.` + k + ` = {p}rate_starts.` + k + `) AND ` + k + ` IN ` + ListMarker),
		SetOverride: p(`INSERT INTO {p}rate_overrides (` + s.KeyColumns + `, lim, period_ms, updated_at)
VALUES (` + marks + `, ?, ?, ?)` + s.Upsert),
		DeleteOverride: p(`DELETE FROM {p}rate_overrides WHERE ` + k + ` = ?`),
		LatestJob: p(`SELECT j.rate_key, j.rate_limit, j.rate_period_ms, ` + LatestJobPolicy + `
FROM {p}jobs j WHERE j.rate_key = ? AND j.finished_at IS NULL ORDER BY j.id DESC LIMIT 1`),
		List:       p(`SELECT r.rate_key, ` + cols + ` FROM {p}rate_limits r WHERE r.rate_key > ? ORDER BY r.rate_key LIMIT ?`),
		BlockedKey: p(`SELECT concurrency_key FROM {p}blocked_executions WHERE job_id = ?`),
		Strays: p(`SELECT r.rate_key FROM {p}rate_limits r
WHERE r.waiting = 0 AND EXISTS (SELECT 1 FROM {p}blocked_executions b WHERE ` + lineOf("r") + `)
ORDER BY r.` + k + ` LIMIT ?`),
		Groups: p(`SELECT ` + s.Group + ` AS grp, count(*), coalesce(sum(waiting), 0),
	coalesce(sum(CASE WHEN waiting > 0 THEN 1 ELSE 0 END), 0)
FROM {p}rate_limits GROUP BY grp ORDER BY grp LIMIT ?`),
	}
}

// nullMicros stores a time that may be zero (none) as NULL.
func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return Micros(t)
}

// scanRate reads rateColumns into r, then extra; r.Key is set, or read
// into key first when key is not nil.
func scanRate(scan func(...any) error, r *driver.Rate, key *[]byte, extra ...any) error {
	var periodMS int64
	var next, oLim, oPeriod sql.NullInt64
	dest := []any{&r.Limit, &periodMS, &r.Waiting, &next, &oLim, &oPeriod, &r.Adapt}
	if key != nil {
		dest = append([]any{key}, dest...)
	}
	if err := scan(append(dest, extra...)...); err != nil {
		return err
	}
	if key != nil {
		r.Key = string(*key)
	}
	r.Period = fromMillis(periodMS)
	r.NextAt = optMicros(next)
	if oLim.Valid {
		r.Override = driver.RateSpec{Key: r.Key, Limit: int(oLim.Int64), Period: fromMillis(oPeriod.Int64)}
	}
	return nil
}

// RateDueRead is RateListDue's read of rates (the table, with any index
// hint a dialect adds): the due keys, earliest first, then one row with
// no key and the earliest NextAt after now. Args: now, max, now.
func RateDueRead(rates string) string {
	return `SELECT d.rate_key, d.next_at FROM (SELECT rate_key, next_at FROM ` + rates + `
	WHERE waiting > 0 AND next_at IS NOT NULL AND next_at <= ? ORDER BY next_at LIMIT ?) d
UNION ALL
SELECT NULL, min(next_at) FROM ` + rates + ` WHERE waiting > 0 AND next_at IS NOT NULL AND next_at > ?`
}

func (e *Executor) RateListDue(ctx context.Context, now time.Time, max int) (driver.RateDue, error) {
	var due driver.RateDue
	us := Micros(now)
	_, err := Collect(ctx, e.db, func(rows *sql.Rows) (struct{}, error) {
		var key *string
		var at *time.Time
		err := rows.Scan(&key, OptAt(&at))
		due.Add(key, at)
		return struct{}{}, err
	}, e.q.Rate.Due, us, max, us)
	if err != nil {
		return driver.RateDue{}, fmt.Errorf("list due rates: %w", err)
	}
	return due, nil
}

func (e *Executor) RateNextAt(ctx context.Context) (time.Time, bool, error) {
	var at sql.NullInt64
	if err := e.db.QueryRowContext(ctx, e.q.Rate.NextAt).Scan(&at); err != nil {
		return time.Time{}, false, fmt.Errorf("read the next rate wake-up: %w", err)
	}
	return optMicros(at), at.Valid, nil
}

func (e *Executor) RateDeleteIdle(ctx context.Context, now time.Time, max int) (int, error) {
	var n int64
	err := e.Atomic(ctx, func(x *Executor) error {
		n = 0
		us := Micros(now)
		idle, err := Column[any](ctx, x.db, x.q.Rate.PickIdle, us, max)
		if err != nil || len(idle) == 0 {
			return err
		}
		if n, err = execInAfter(ctx, x, x.q.Rate.DeleteIdle, []any{us}, idle); err != nil || n == 0 {
			return err
		}
		// The rows deleted were those still idle; a ring whose row stays
		// holds a start or a reservation, and is not deleted here.
		_, err = execInAfter(ctx, x, x.q.Rate.DeleteRings, nil, idle)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete idle rates: %w", err)
	}
	return int(n), nil
}

func (e *Executor) KeyRateSet(ctx context.Context, spec driver.RateSpec, now time.Time) error {
	if err := e.d.CheckKey(spec.Key); err != nil {
		return fmt.Errorf("set key rate: %w", err)
	}
	if _, err := e.exec(ctx, e.q.Rate.SetOverride, e.key(spec.Key, spec.Limit, spec.Period.Milliseconds(), Micros(now))...); err != nil {
		return fmt.Errorf("set the rate of key %q: %w", spec.Key, err)
	}
	return nil
}

func (e *Executor) KeyRateDelete(ctx context.Context, key string) (bool, error) {
	n, err := e.exec(ctx, e.q.Rate.DeleteOverride, e.d.KeyIndex(key))
	if err != nil {
		return false, fmt.Errorf("clear the rate of key %q: %w", key, err)
	}
	return n == 1, nil
}

func (e *Executor) JobRateGetLatest(ctx context.Context, key string) (driver.RateSpec, bool, error) {
	var s driver.RateSpec
	var periodMS, policyMS int64
	var policyLimit int
	ok, err := found(e.db.QueryRowContext(ctx, e.q.Rate.LatestJob, e.d.KeyIndex(key)).Scan(&s.Key, &s.Limit, &periodMS,
		&policyLimit, &policyMS))
	if err != nil {
		return driver.RateSpec{}, false, fmt.Errorf("read the newest job of rate %q: %w", key, err)
	}
	if s.Limit == 0 {
		s.Limit, periodMS = policyLimit, policyMS
	}
	s.Period = fromMillis(periodMS)
	return s, ok, nil
}

func (e *Executor) RateGet(ctx context.Context, key string, since time.Time) (driver.Rate, int, bool, error) {
	r := driver.Rate{Key: key}
	var recent int
	ok, err := found(scanRate(e.db.QueryRowContext(ctx, e.q.Rate.Read, Micros(since), e.d.KeyIndex(key)).Scan, &r, nil, &recent))
	if err != nil {
		return driver.Rate{}, 0, false, fmt.Errorf("read rate %q: %w", key, err)
	}
	if !ok {
		return driver.Rate{}, 0, false, nil
	}
	return r, recent, true, nil
}

func (e *Executor) RateList(ctx context.Context, after string, max int) ([]driver.Rate, error) {
	out, err := Collect(ctx, e.db, func(rows *sql.Rows) (r driver.Rate, err error) {
		var key []byte
		err = scanRate(rows.Scan, &r, &key)
		return r, err
	}, e.q.Rate.List, e.d.Text(after), max)
	if err != nil {
		return nil, fmt.Errorf("list rates: %w", err)
	}
	return out, nil
}

func (e *Executor) LineGetKey(ctx context.Context, jobID int64) (string, bool, error) {
	var key []byte
	ok, err := found(e.db.QueryRowContext(ctx, e.q.Rate.BlockedKey, jobID).Scan(&key))
	if err != nil {
		return "", false, fmt.Errorf("read the line of job %d: %w", jobID, err)
	}
	return string(key), ok, nil
}

func (e *Executor) RateListGroups(ctx context.Context, max int) ([]driver.RateGroupStats, error) {
	out, err := Collect(ctx, e.db, func(rows *sql.Rows) (g driver.RateGroupStats, err error) {
		var grp []byte
		err = rows.Scan(&grp, &g.Keys, &g.Waiting, &g.Throttled)
		g.Group = string(grp)
		return g, err
	}, e.q.Rate.Groups, max)
	if err != nil {
		return nil, fmt.Errorf("sum rate keys by group: %w", err)
	}
	return out, nil
}

func (e *Executor) RateListStrayLines(ctx context.Context, max int) ([]string, error) {
	keys, err := Column[string](ctx, e.db, e.q.Rate.Strays, max)
	if err != nil {
		return nil, fmt.Errorf("find rate lines counted empty: %w", err)
	}
	return keys, nil
}

// lockRow is query ended by lock, a locking read of a row alone, or
// empty where lock is (the transaction's write lock is the lock).
func lockRow(query, lock string) string {
	if lock == "" {
		return ""
	}
	return query + lock
}
