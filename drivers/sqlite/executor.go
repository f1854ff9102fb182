package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// dbtx is what *sql.DB and *sql.Tx have in common.
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type executor struct {
	d    *engine
	db   dbtx
	q    *queries
	inTx bool
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us) }

// ids encodes a list of ids for json_each.
func ids(list []int64) string { return jsonOf(list) }

// atomic runs fn inside a write transaction: the current one, or a new
// BEGIN IMMEDIATE one when the executor runs outside any.
func (e *executor) atomic(ctx context.Context, fn func(e *executor) error) error {
	if e.inTx {
		return fn(e)
	}
	tx, err := e.d.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(&tx.(*txExecutor).executor); err != nil {
		_ = tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}

// exec runs one write statement; outside a transaction it still queues
// on the process's writer, so writers never spin in the busy handler.
func (e *executor) exec(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := e.atomic(ctx, func(e *executor) error {
		res, err := e.db.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// maxInsertRows bounds the rows of one multi-row INSERT. Counts are cut
// into powers of two up to it (1000 = 7×128 + 64 + 32 + 8), so a handful
// of statement texts serve every count and each stays prepared.
const maxInsertRows = 128

// insertRows inserts the rows of values (width values each) with
// multi-row INSERTs: head is the statement up to VALUES, row one row's
// placeholders. With returning it returns the new rowids in input order:
// SQLite assigns them increasing in the order of the VALUES list, under
// the write lock, so sorting a chunk's RETURNING rows recovers that order.
func (e *executor) insertRows(ctx context.Context, head, row string, width int, values []any, returning bool) ([]int64, error) {
	n := len(values) / width
	var ids []int64
	if returning {
		ids = make([]int64, 0, n)
	}
	for done := 0; done < n; {
		size := maxInsertRows
		for size > n-done {
			size /= 2
		}
		query := head + strings.TrimSuffix(strings.Repeat(row+", ", size), ", ")
		args := values[done*width : (done+size)*width]
		done += size
		if !returning {
			if _, err := e.db.ExecContext(ctx, query, args...); err != nil {
				return nil, err
			}
			continue
		}
		chunk, err := e.queryIDs(ctx, query+" RETURNING id", args...)
		if err != nil {
			return nil, err
		}
		if len(chunk) != size {
			return nil, fmt.Errorf("%d ids returned for %d rows", len(chunk), size)
		}
		slices.Sort(chunk)
		ids = append(ids, chunk...)
	}
	return ids, nil
}

func (e *executor) InsertJobs(ctx context.Context, now time.Time, jobs []*driver.NewJob) error {
	if len(jobs) == 0 {
		return nil
	}
	return e.atomic(ctx, func(e *executor) error {
		values := make([]any, 0, 12*len(jobs))
		for _, j := range jobs {
			values = append(values, j.Kind, j.Queue, string(j.Args), j.Priority, j.MaxAttempts, j.Limit.Key,
				j.Limit.To, j.Limit.Duration.Milliseconds(), int(j.Limit.OnConflict), j.Limit.MaxBlocked,
				micros(j.ScheduledAt), micros(now))
		}
		ids, err := e.insertRows(ctx, e.q.insertJobs, jobRow, 12, values, true)
		if err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
		byState := map[driver.State][]driver.Execution{}
		for i, j := range jobs {
			j.ID = ids[i]
			at := now
			if j.State == driver.Scheduled {
				at = j.ScheduledAt
			}
			byState[j.State] = append(byState[j.State], driver.Execution{
				JobID: j.ID, Queue: j.Queue, Priority: j.Priority, Key: j.Limit.Key, At: at})
		}
		for _, state := range []driver.State{driver.Ready, driver.Scheduled, driver.Blocked} {
			if err := e.insertExecutions(ctx, state, byState[state]); err != nil {
				return err
			}
		}
		return nil
	})
}

// insertExecutions puts rows into state's table, each row's At being its
// created_at (ready, blocked) or scheduled_at (scheduled).
func (e *executor) insertExecutions(ctx context.Context, state driver.State, rows []driver.Execution) error {
	if len(rows) == 0 {
		return nil
	}
	head, row, width := "", executionRow, 4
	switch state {
	case driver.Ready:
		head = e.q.insertReady
	case driver.Scheduled:
		head = e.q.insertScheduled
	case driver.Blocked:
		head, row, width = e.q.insertBlocked, blockedRow, 5
	default:
		return fmt.Errorf("insert executions: unknown state %d", state)
	}
	values := make([]any, 0, width*len(rows))
	for _, r := range rows {
		values = append(values, r.JobID, r.Queue, r.Priority)
		if state == driver.Blocked {
			values = append(values, r.Key)
		}
		values = append(values, micros(r.At))
	}
	if _, err := e.insertRows(ctx, head, row, width, values, false); err != nil {
		return fmt.Errorf("insert executions: %w", err)
	}
	return nil
}

func (e *executor) InsertExecutions(ctx context.Context, state driver.State, rows []driver.Execution) error {
	return e.atomic(ctx, func(e *executor) error {
		return e.insertExecutions(ctx, state, rows)
	})
}

// scanJob reads jobColumns, then extra.
func scanJob(scan func(...any) error, j *driver.Job, extra ...any) error {
	var durMS, scheduled, created int64
	var conflict int
	var args string
	dest := append([]any{&j.ID, &j.Kind, &j.Queue, &args, &j.Priority, &j.Attempt, &j.MaxAttempts,
		&j.Limit.Key, &j.Limit.To, &durMS, &conflict, &j.Limit.MaxBlocked, &scheduled, &created}, extra...)
	if err := scan(dest...); err != nil {
		return err
	}
	j.Args = []byte(args)
	j.Limit.Duration = time.Duration(durMS) * time.Millisecond
	j.Limit.OnConflict = driver.OnConflict(conflict)
	j.ScheduledAt, j.CreatedAt = fromMicros(scheduled), fromMicros(created)
	return nil
}

func (e *executor) queryClaims(ctx context.Context, query string, args ...any) ([]*driver.Claim, error) {
	rows, err := e.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.Claim
	for rows.Next() {
		c := &driver.Claim{}
		var claimedAt int64
		if err := scanJob(rows.Scan, &c.Job, &c.Fence, &claimedAt); err != nil {
			return nil, err
		}
		c.ClaimedAt = fromMicros(claimedAt)
		out = append(out, c)
	}
	return out, rows.Err()
}

func (e *executor) queryIDs(ctx context.Context, query string, args ...any) ([]int64, error) {
	rows, err := e.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func (e *executor) ClaimReady(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	var claims []*driver.Claim
	err := e.atomic(ctx, func(e *executor) error {
		picked, err := e.queryIDs(ctx, e.q.pickReady, p.Queue, p.Max)
		if err != nil || len(picked) == 0 {
			return err
		}
		list := ids(picked)
		if _, err := e.db.ExecContext(ctx, e.q.deleteReady, list); err != nil {
			return err
		}
		if _, err := e.db.ExecContext(ctx, e.q.insertClaims, p.Queue, p.ProcessID, micros(p.Now), list); err != nil {
			return err
		}
		claims, err = e.queryClaims(ctx, e.q.selectClaims, list)
		return err
	})
	return claims, err
}

func (e *executor) HasReady(ctx context.Context, queue string) (bool, error) {
	var any bool
	err := e.db.QueryRowContext(ctx, e.q.hasReady, queue).Scan(&any)
	return any, err
}

// QueueCap needs no row lock: the write lock of the claim's transaction
// serialises claimers.
func (e *executor) QueueCap(ctx context.Context, queue string) (int, error) {
	var limit int
	err := e.db.QueryRowContext(ctx, e.q.policyCap, queue).Scan(&limit)
	return limit, err
}

func (e *executor) CountClaimed(ctx context.Context, queue string) (int, error) {
	var n int
	err := e.db.QueryRowContext(ctx, e.q.countClaimed, queue).Scan(&n)
	return n, err
}

func (e *executor) CompleteClaims(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Fenced, error) {
	pairs := make([][2]int64, len(claims))
	for i, c := range claims {
		pairs[i] = [2]int64{c.ID, c.Fence}
	}
	arg := jsonOf(pairs)
	var matched []driver.Fenced
	err := e.atomic(ctx, func(e *executor) error {
		matched = matched[:0]
		rows, err := e.db.QueryContext(ctx, e.q.endClaims, arg)
		if err != nil {
			return err
		}
		ended := make([]int64, 0, len(claims))
		for rows.Next() {
			var f driver.Fenced
			if err := rows.Scan(&f.JobID, &f.Fence); err != nil {
				rows.Close()
				return err
			}
			matched = append(matched, f)
			ended = append(ended, f.JobID)
		}
		if err := closeRows(rows); err != nil || len(ended) == 0 {
			return err
		}
		if keep {
			_, err = e.db.ExecContext(ctx, e.q.finishJobs, micros(now), ids(ended))
		} else {
			_, err = e.db.ExecContext(ctx, e.q.deleteJobs, ids(ended))
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("complete %d jobs: %w", len(claims), err)
	}
	return matched, nil
}

// ReleaseMany releases and promotes for every key of a batch in at most
// five statements, whatever the number of keys: it does set-wise what
// semaphore.SignalN does per key (release capped at the limit, promote
// min(free, blocked) jobs, renew the expiry of keys that promoted). The
// transaction's write lock makes reading, computing and writing back safe.
func (e *executor) ReleaseMany(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	out := make([]driver.Promotion, len(keys))
	err := e.atomic(ctx, func(e *executor) error {
		sems, err := e.readSems(ctx, keys)
		if err != nil {
			return err
		}
		var waiting []string // keys with a free slot and a blocked job
		most := 0
		for i, k := range keys {
			s := sems[k]
			if s == nil {
				continue // deleted idle: nothing held it
			}
			s.value = min(s.value+counts[i], s.limit)
			if s.take = min(max(s.value, 0), s.blocked); s.take > 0 {
				waiting = append(waiting, k)
				most = max(most, s.take)
			}
		}
		var picked []int64
		keyOf := map[int64]string{}
		if len(waiting) > 0 {
			rows, err := e.db.QueryContext(ctx, e.q.pickBlockedOfKeys, jsonOf(waiting), most)
			if err != nil {
				return err
			}
			for rows.Next() {
				var key string
				var id int64
				if err := rows.Scan(&key, &id); err != nil {
					rows.Close()
					return err
				}
				// Each key's rows come in line order: keep its first take.
				if s := sems[key]; s.moved < s.take {
					s.moved++
					picked = append(picked, id)
					keyOf[id] = key
				}
			}
			if err := closeRows(rows); err != nil {
				return err
			}
		}
		queueOf := map[string][]string{} // key -> queues promoted into
		if len(picked) > 0 {
			list := ids(picked)
			queues, err := e.promoteReady(ctx, list, now)
			if err != nil {
				return err
			}
			for id, q := range queues {
				if k := keyOf[id]; !slices.Contains(queueOf[k], q) {
					queueOf[k] = append(queueOf[k], q)
				}
			}
			if _, err := e.db.ExecContext(ctx, e.q.deleteBlocked, list); err != nil {
				return err
			}
		}
		settle := make([][4]any, 0, len(sems))
		for i, k := range keys {
			s := sems[k]
			if s == nil {
				continue
			}
			s.value -= s.moved
			if s.moved < s.take {
				s.blocked = 0 // fewer rows than counted: nothing is left blocked
			} else {
				s.blocked -= s.moved
			}
			settle = append(settle, [4]any{k, s.value, s.blocked, s.moved})
			out[i] = driver.Promotion{Jobs: s.moved, Queues: queueOf[k]}
		}
		if len(settle) == 0 {
			return nil
		}
		_, err = e.db.ExecContext(ctx, e.q.settleKeys, micros(now), jsonOf(settle))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("release %d keys: %w", len(keys), err)
	}
	return out, nil
}

// semRow is the part of a semaphore ReleaseMany reads and writes.
type semRow struct{ value, limit, blocked, take, moved int }

func (e *executor) readSems(ctx context.Context, keys []string) (map[string]*semRow, error) {
	rows, err := e.db.QueryContext(ctx, e.q.readSems, jsonOf(keys))
	if err != nil {
		return nil, err
	}
	sems := make(map[string]*semRow, len(keys))
	for rows.Next() {
		var key string
		s := &semRow{}
		if err := rows.Scan(&key, &s.value, &s.limit, &s.blocked); err != nil {
			rows.Close()
			return nil, err
		}
		sems[key] = s
	}
	return sems, closeRows(rows)
}

// closeRows closes rows read to the end and reports any error of theirs.
func closeRows(rows *sql.Rows) error {
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	return rows.Close()
}

// jsonOf encodes v for json_each; v is made of strings and numbers only.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func (e *executor) DeleteClaim(ctx context.Context, jobID, fence int64) (bool, error) {
	n, err := e.exec(ctx, e.q.deleteClaim, jobID, fence)
	if err != nil {
		return false, fmt.Errorf("delete claim of job %d: %w", jobID, err)
	}
	return n == 1, nil
}

func (e *executor) FinishJob(ctx context.Context, jobID int64, now time.Time, discarded bool) error {
	if _, err := e.exec(ctx, e.q.finishJob, discarded, micros(now), jobID); err != nil {
		return fmt.Errorf("finish job %d: %w", jobID, err)
	}
	return nil
}

func (e *executor) DeleteJobs(ctx context.Context, list []int64) error {
	if _, err := e.exec(ctx, e.q.deleteJobs, ids(list)); err != nil {
		return fmt.Errorf("delete jobs: %w", err)
	}
	return nil
}

func (e *executor) RecordError(ctx context.Context, jobID int64, msg string) error {
	if _, err := e.exec(ctx, e.q.recordError, msg, jobID); err != nil {
		return fmt.Errorf("record error of job %d: %w", jobID, err)
	}
	return nil
}

func (e *executor) InsertFailed(ctx context.Context, jobID int64, msg string, now time.Time) error {
	if _, err := e.exec(ctx, e.q.insertFailed, msg, micros(now), jobID); err != nil {
		return fmt.Errorf("move job %d to failed: %w", jobID, err)
	}
	return nil
}

func (e *executor) SemaphoreEnsure(ctx context.Context, l driver.Limit, now time.Time) error {
	if _, err := e.exec(ctx, e.q.semEnsure, l.Key, max(l.To, 1), l.Duration.Milliseconds(), micros(now.Add(l.Duration))); err != nil {
		return fmt.Errorf("create semaphore %q: %w", l.Key, err)
	}
	return nil
}

// SemaphoreLock reads the row; the BEGIN IMMEDIATE transaction around it
// already holds the database's write lock, which is the lock.
func (e *executor) SemaphoreLock(ctx context.Context, key, queue string) (driver.Semaphore, bool, error) {
	s := driver.Semaphore{Key: key}
	var durMS, expires int64
	err := e.db.QueryRowContext(ctx, e.q.semLock, key, queue).Scan(&s.Value, &s.Limit, &s.Blocked, &durMS, &expires,
		&s.Override, &s.Policy.Queue, &s.Policy.MaxActivePerKey, &s.Policy.MaxBlocked)
	if errors.Is(err, sql.ErrNoRows) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("lock semaphore %q: %w", key, err)
	}
	s.Duration = time.Duration(durMS) * time.Millisecond
	s.ExpiresAt = fromMicros(expires)
	return s, true, nil
}

func (e *executor) SemaphoreTryLock(ctx context.Context, key string) (bool, error) {
	var one int
	err := e.db.QueryRowContext(ctx, e.q.semTryLock, key).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock semaphore %q: %w", key, err)
	}
	return true, nil
}

func (e *executor) SemaphoreSave(ctx context.Context, s driver.Semaphore) error {
	_, err := e.exec(ctx, e.q.semSave, s.Value, s.Limit, s.Blocked, s.Duration.Milliseconds(), micros(s.ExpiresAt), s.Key)
	if err != nil {
		return fmt.Errorf("save semaphore %q: %w", s.Key, err)
	}
	return nil
}

func (e *executor) PromoteBlocked(ctx context.Context, key string, n int, now time.Time) (driver.Promotion, error) {
	var moved driver.Promotion
	err := e.atomic(ctx, func(e *executor) error {
		picked, err := e.queryIDs(ctx, e.q.pickBlocked, key, n)
		if err != nil || len(picked) == 0 {
			return err
		}
		list := ids(picked)
		queues, err := e.promoteReady(ctx, list, now)
		if err != nil {
			return err
		}
		_, err = e.db.ExecContext(ctx, e.q.deleteBlocked, list)
		for _, q := range queues {
			moved.Jobs++
			moved.AddQueue(q)
		}
		return err
	})
	if err != nil {
		return driver.Promotion{}, fmt.Errorf("promote blocked jobs of %q: %w", key, err)
	}
	return moved, nil
}

// promoteReady copies the blocked jobs of list (JSON ids) to ready and
// returns the queue of each, by job id.
func (e *executor) promoteReady(ctx context.Context, list string, now time.Time) (map[int64]string, error) {
	rows, err := e.db.QueryContext(ctx, e.q.promoteReady, micros(now), list)
	if err != nil {
		return nil, err
	}
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var q string
		if err := rows.Scan(&id, &q); err != nil {
			rows.Close()
			return nil, err
		}
		out[id] = q
	}
	return out, closeRows(rows)
}

func (e *executor) CountHolders(ctx context.Context, key string) (int, int, error) {
	var holders, blocked int
	if err := e.db.QueryRowContext(ctx, e.q.countHolders, key).Scan(&holders, &blocked); err != nil {
		return 0, 0, fmt.Errorf("count holders of %q: %w", key, err)
	}
	return holders, blocked, nil
}

func (e *executor) HasDueScheduled(ctx context.Context, now time.Time) (bool, error) {
	var due bool
	if err := e.db.QueryRowContext(ctx, e.q.hasDueScheduled, micros(now)).Scan(&due); err != nil {
		return false, fmt.Errorf("look for due scheduled jobs: %w", err)
	}
	return due, nil
}

func (e *executor) TakeDueScheduled(ctx context.Context, now time.Time, max int) ([]*driver.Job, error) {
	var out []*driver.Job
	err := e.atomic(ctx, func(e *executor) error {
		due, err := e.queryIDs(ctx, e.q.pickDueScheduled, micros(now), max)
		if err != nil || len(due) == 0 {
			return err
		}
		list := ids(due)
		if _, err := e.db.ExecContext(ctx, e.q.deleteScheduled, list); err != nil {
			return err
		}
		rows, err := e.db.QueryContext(ctx, e.q.selectJobs, list)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			j := &driver.Job{}
			if err := scanJob(rows.Scan, j); err != nil {
				return err
			}
			out = append(out, j)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("take due scheduled jobs: %w", err)
	}
	return out, nil
}

func (e *executor) keys(ctx context.Context, what, query string, args ...any) ([]string, error) {
	rows, err := e.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s semaphores: %w", what, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("list %s semaphores: %w", what, err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

func (e *executor) ExpiredSemaphores(ctx context.Context, now time.Time, after string, max int) ([]string, error) {
	return e.keys(ctx, "expired", e.q.expiredSems, micros(now), after, max)
}

func (e *executor) PromotableSemaphores(ctx context.Context, after string, max int) ([]string, error) {
	return e.keys(ctx, "promotable", e.q.promotableSems, after, max)
}

func (e *executor) DeleteIdleSemaphores(ctx context.Context, now time.Time, max int) (int, error) {
	n, err := e.exec(ctx, e.q.deleteIdleSems, micros(now), max)
	if err != nil {
		return 0, fmt.Errorf("delete idle semaphores: %w", err)
	}
	return int(n), nil
}

func (e *executor) LostClaims(ctx context.Context, now time.Time, deadAfter time.Duration, max int) ([]*driver.Claim, error) {
	dead, err := e.deadProcesses(ctx, now, deadAfter)
	if err != nil {
		return nil, fmt.Errorf("find dead processes: %w", err)
	}
	claims, err := e.queryClaims(ctx, e.q.claimsOfDead, ids(dead), max)
	if err != nil {
		return nil, fmt.Errorf("find claims of dead processes: %w", err)
	}
	return claims, nil
}

func (e *executor) LostClaimsOfKey(ctx context.Context, key string, now time.Time, silence time.Duration) ([]*driver.Claim, error) {
	rows, err := e.db.QueryContext(ctx, e.q.lostClaimsOfKey, micros(now), key, silence.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("find lost claims of %q: %w", key, err)
	}
	defer rows.Close()
	var out []*driver.Claim
	for rows.Next() {
		c := &driver.Claim{}
		var claimedAt, processID, silenceMS int64
		if err := scanJob(rows.Scan, &c.Job, &c.Fence, &claimedAt, &processID, &silenceMS); err != nil {
			return nil, fmt.Errorf("find lost claims of %q: %w", key, err)
		}
		c.ClaimedAt = fromMicros(claimedAt)
		if processID != 0 && e.d.aliveByBeacon(processID, now, time.Duration(silenceMS)*time.Millisecond) {
			continue
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find lost claims of %q: %w", key, err)
	}
	return out, nil
}

func (e *executor) DeleteFinishedJobs(ctx context.Context, before time.Time, max int) (int, error) {
	n, err := e.exec(ctx, e.q.deleteFinished, micros(before), max)
	if err != nil {
		return 0, fmt.Errorf("delete finished jobs: %w", err)
	}
	return int(n), nil
}

func (e *executor) RegisterProcess(ctx context.Context, p driver.Process) (int64, error) {
	var id int64
	err := e.db.QueryRowContext(ctx, e.q.registerProcess, p.Kind, p.Name, p.Hostname, p.PID, p.Queues,
		p.HeartbeatInterval.Milliseconds(), p.DeadAfter.Milliseconds(), micros(p.StartedAt)).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("register process: %w", err)
	}
	if err := e.d.Beacon(id, p.StartedAt); err != nil && !errors.Is(err, driver.ErrNoBeacon) {
		return 0, fmt.Errorf("register process: %w", err)
	}
	return id, nil
}

// Heartbeat writes the beat and renews semaphores in one write
// transaction: SQLite's write lock is the database's, so splitting them
// would only take it twice. A beat the lock holds up still shows through
// the process's beacon (beacon.go).
func (e *executor) Heartbeat(ctx context.Context, b driver.Beat) (bool, error) {
	n, err := e.exec(ctx, e.q.heartbeat, micros(b.At), micros(b.BeatingSince), b.ProcessID)
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	return n > 0, nil
}

func (e *executor) RenewHeld(ctx context.Context, processID int64, at time.Time, renewBelow float64) error {
	if _, err := e.exec(ctx, e.q.renewSems, micros(at), processID, renewBelow); err != nil {
		return fmt.Errorf("renew semaphores: %w", err)
	}
	return nil
}

func (e *executor) ClaimsOfProcess(ctx context.Context, processID int64) ([]driver.OwnClaim, error) {
	rows, err := e.db.QueryContext(ctx, e.q.claimsOfProcess, processID)
	if err != nil {
		return nil, fmt.Errorf("list claims of process %d: %w", processID, err)
	}
	defer rows.Close()
	var out []driver.OwnClaim
	for rows.Next() {
		var c driver.OwnClaim
		var at int64
		if err := rows.Scan(&c.JobID, &c.Fence, &at); err != nil {
			return nil, fmt.Errorf("list claims of process %d: %w", processID, err)
		}
		c.ClaimedAt = fromMicros(at)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list claims of process %d: %w", processID, err)
	}
	return out, nil
}

func (e *executor) DeregisterProcess(ctx context.Context, processID int64) error {
	if _, err := e.exec(ctx, e.q.deregisterProcess, processID); err != nil {
		return fmt.Errorf("deregister process %d: %w", processID, err)
	}
	e.d.removeBeacons([]int64{processID})
	return nil
}

func (e *executor) DeleteDeadProcesses(ctx context.Context, now time.Time, deadAfter time.Duration) (int, error) {
	var deleted []int64
	err := e.atomic(ctx, func(e *executor) error {
		dead, err := e.deadProcesses(ctx, now, deadAfter)
		if err != nil || len(dead) == 0 {
			return err
		}
		deleted, err = e.queryIDs(ctx, e.q.deleteProcesses, ids(dead))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete dead processes: %w", err)
	}
	e.d.removeBeacons(deleted)
	return len(deleted), nil
}

func (e *executor) ListProcesses(ctx context.Context) ([]driver.Process, error) {
	rows, err := e.db.QueryContext(ctx, e.q.listProcesses)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	defer rows.Close()
	var out []driver.Process
	for rows.Next() {
		var p driver.Process
		var hbMS, deadMS, started, last, since int64
		if err := rows.Scan(&p.ID, &p.Kind, &p.Name, &p.Hostname, &p.PID, &p.Queues, &hbMS, &deadMS,
			&started, &last, &since); err != nil {
			return nil, fmt.Errorf("list processes: %w", err)
		}
		p.HeartbeatInterval = time.Duration(hbMS) * time.Millisecond
		p.DeadAfter = time.Duration(deadMS) * time.Millisecond
		p.StartedAt, p.LastHeartbeatAt, p.BeatingSince = fromMicros(started), fromMicros(last), fromMicros(since)
		// The beacon may be fresher than the row (beacon.go).
		if at := e.d.beaconAt(p.ID); at.After(p.LastHeartbeatAt) {
			p.LastHeartbeatAt = at
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func (e *executor) GetJob(ctx context.Context, id int64) (*driver.JobInfo, bool, error) {
	info := &driver.JobInfo{}
	var state string
	var finished sql.NullInt64
	err := scanJob(e.db.QueryRowContext(ctx, e.q.getJob, id).Scan, &info.Job, &info.LastError, &finished, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get job %d: %w", id, err)
	}
	if finished.Valid {
		t := fromMicros(finished.Int64)
		info.FinishedAt = &t
	}
	info.State = driver.JobState(state)
	return info, true, nil
}

func (e *executor) CountByQueue(ctx context.Context) ([]driver.QueueCounts, error) {
	rows, err := e.db.QueryContext(ctx, e.q.countByQueue)
	if err != nil {
		return nil, fmt.Errorf("count jobs by queue: %w", err)
	}
	defer rows.Close()
	var out []driver.QueueCounts
	for rows.Next() {
		var c driver.QueueCounts
		if err := rows.Scan(&c.Queue, &c.Ready, &c.Running, &c.Scheduled, &c.Blocked, &c.Failed); err != nil {
			return nil, fmt.Errorf("count jobs by queue: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func (e *executor) SchemaVersion(ctx context.Context) (int64, error) {
	var v int64
	err := e.db.QueryRowContext(ctx, e.q.schemaVersion).Scan(&v)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return 0, nil // never migrated
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

func (e *executor) policies(ctx context.Context, query string, args ...any) ([]driver.Policy, error) {
	rows, err := e.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []driver.Policy
	for rows.Next() {
		var p driver.Policy
		var created, updated int64
		if err := rows.Scan(&p.Queue, &p.Namespace, &p.MaxActive, &p.MaxActivePerKey, &p.MaxBlocked, &created, &updated); err != nil {
			return nil, err
		}
		p.CreatedAt, p.UpdatedAt = fromMicros(created), fromMicros(updated)
		out = append(out, p)
	}
	return out, rows.Err()
}

// LockPolicies reads the policies; the write transaction is the lock.
func (e *executor) LockPolicies(ctx context.Context, namespace string, queues []string) ([]driver.Policy, error) {
	out, err := e.policies(ctx, e.q.lockPolicies, namespace, jsonOf(queues))
	if err != nil {
		return nil, fmt.Errorf("lock policies: %w", err)
	}
	return out, nil
}

func (e *executor) ListPolicies(ctx context.Context) ([]driver.Policy, error) {
	out, err := e.policies(ctx, e.q.listPolicies)
	if err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	return out, nil
}

func (e *executor) InsertPolicy(ctx context.Context, p driver.Policy) (bool, error) {
	n, err := e.exec(ctx, e.q.insertPolicy, p.Queue, p.Namespace, p.MaxActive, p.MaxActivePerKey, p.MaxBlocked, micros(p.UpdatedAt))
	if err != nil {
		return false, fmt.Errorf("insert policy of queue %q: %w", p.Queue, err)
	}
	return n == 1, nil
}

func (e *executor) UpdatePolicy(ctx context.Context, p driver.Policy) error {
	if _, err := e.exec(ctx, e.q.updatePolicy, p.MaxActive, p.MaxActivePerKey, p.MaxBlocked, micros(p.UpdatedAt), p.Queue); err != nil {
		return fmt.Errorf("update policy of queue %q: %w", p.Queue, err)
	}
	return nil
}

func (e *executor) DeletePolicy(ctx context.Context, queue string) error {
	if _, err := e.exec(ctx, e.q.deletePolicy, queue); err != nil {
		return fmt.Errorf("delete policy of queue %q: %w", queue, err)
	}
	return nil
}

func (e *executor) PolicyKeys(ctx context.Context, queue string) ([]string, error) {
	return e.keys(ctx, "policy-limited", e.q.policyKeys, queue)
}

func (e *executor) SetKeyLimit(ctx context.Context, key string, limit int, now time.Time) error {
	if _, err := e.exec(ctx, e.q.setKeyLimit, key, limit, micros(now)); err != nil {
		return fmt.Errorf("set limit of key %q: %w", key, err)
	}
	return nil
}

func (e *executor) DeleteKeyLimit(ctx context.Context, key string) (bool, error) {
	n, err := e.exec(ctx, e.q.deleteKeyLimit, key)
	if err != nil {
		return false, fmt.Errorf("clear limit of key %q: %w", key, err)
	}
	return n == 1, nil
}

func (e *executor) LatestJobLimit(ctx context.Context, key string) (driver.Limit, string, bool, error) {
	var j driver.Job
	err := scanJob(e.db.QueryRowContext(ctx, e.q.latestJobLimit, key).Scan, &j)
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Limit{}, "", false, nil
	}
	if err != nil {
		return driver.Limit{}, "", false, fmt.Errorf("read the newest job of key %q: %w", key, err)
	}
	return j.Limit, j.Queue, true, nil
}
