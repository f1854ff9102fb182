package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/bqueue/bq/internal/driver"
)

// MaxKeyBytes is the longest concurrency key (Group + "/" + Key) the MySQL
// driver stores: 4096 bytes, 1,024 characters of any script. A longer
// key is refused at enqueue, never truncated. bq.MaxKeyBytes (2048), checked
// before any driver is reached, is the limit users meet; this one is a
// backstop.
const MaxKeyBytes = 4096

// maxRows bounds the rows of one multi-row statement, keeping it well
// under the 65,535 placeholders a prepared statement may have.
const maxRows = 1000

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

// hash is the SHA-256 of key, the column keys are indexed by; the
// schema's generated columns and CHECK compute the same.
func hash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// checkKey refuses a key too long for the key columns.
func checkKey(key string) error {
	if len(key) > MaxKeyBytes {
		start := key[:32]
		for !utf8.ValidString(start) && len(start) > 28 {
			start = start[:len(start)-1] // do not cut a character in two
		}
		return fmt.Errorf("concurrency key %q... is %d bytes long: the MySQL driver stores keys of at most %d bytes (Group + \"/\" + Key); use a shorter key, e.g. a hash of the long one",
			start, len(key), MaxKeyBytes)
	}
	return nil
}

// nullKey is the concurrency_key column's value: NULL for an unkeyed job,
// else the key's bytes (VARBINARY, so no character set can alter them).
func nullKey(key string) any {
	if key == "" {
		return nil
	}
	return []byte(key)
}

// atomic runs fn inside a READ COMMITTED transaction: the current one, or
// one of its own when the executor runs outside any. A transaction of its
// own meets deadlocks like any bq transaction and is run again.
func (e *executor) atomic(ctx context.Context, fn func(e *executor) error) error {
	if e.inTx {
		return fn(e)
	}
	return driver.InTx(ctx, e.d, func(tx driver.Executor) error {
		return fn(&tx.(*txExecutor).executor)
	})
}

// write runs one write statement; outside a transaction it still runs in
// a READ COMMITTED one, whatever the pool's default isolation, so it
// takes no gap locks.
func (e *executor) write(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := e.atomic(ctx, func(e *executor) (err error) {
		res, err = e.db.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

// exec runs one write statement and returns the rows it changed.
func (e *executor) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := e.write(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// execIn runs query with its id list set to ids, in chunks of maxRows.
func execIn[T any](ctx context.Context, e *executor, query string, ids []T) (int64, error) {
	var n int64
	for chunk := range chunks(ids) {
		res, err := e.db.ExecContext(ctx, in(query, len(chunk)), anys(chunk)...)
		if err != nil {
			return n, err
		}
		m, err := res.RowsAffected()
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

// chunks yields ids in slices of at most maxRows.
func chunks[T any](ids []T) func(yield func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(ids) > 0 {
			n := min(len(ids), maxRows)
			if !yield(ids[:n]) {
				return
			}
			ids = ids[n:]
		}
	}
}

func anys[T any](list []T) []any {
	out := make([]any, len(list))
	for i, v := range list {
		out[i] = v
	}
	return out
}

func (e *executor) InsertJobs(ctx context.Context, now time.Time, jobs []*driver.NewJob) error {
	if len(jobs) == 0 {
		return nil
	}
	for _, j := range jobs {
		if err := checkKey(j.Limit.Key); err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
	}
	return e.atomic(ctx, func(e *executor) error {
		// One INSERT per job: LastInsertId is then the job's own id. A
		// multi-row INSERT's ids are consecutive only under some
		// innodb_autoinc_lock_mode settings, not MySQL 8's default.
		byState := map[driver.State][]driver.Execution{}
		for _, j := range jobs {
			res, err := e.db.ExecContext(ctx, e.q.insertJob, j.Kind, []byte(j.Queue), string(j.Args), j.Priority,
				j.MaxAttempts, nullKey(j.Limit.Key), j.Limit.To, j.Limit.Duration.Milliseconds(),
				int(j.Limit.OnConflict), j.Limit.MaxBlocked, micros(j.ScheduledAt), micros(now))
			if err != nil {
				return fmt.Errorf("insert job: %w", err)
			}
			if j.ID, err = res.LastInsertId(); err != nil {
				return fmt.Errorf("insert job: %w", err)
			}
			at := now
			if j.State == driver.Scheduled {
				at = j.ScheduledAt
			}
			byState[j.State] = append(byState[j.State], driver.Execution{
				JobID: j.ID, Queue: j.Queue, Priority: j.Priority, Key: j.Limit.Key, At: at,
			})
		}
		for _, state := range []driver.State{driver.Ready, driver.Scheduled, driver.Blocked} {
			if err := e.insertExecutions(ctx, state, byState[state]); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *executor) InsertExecutions(ctx context.Context, state driver.State, rows []driver.Execution) error {
	if len(rows) == 0 {
		return nil
	}
	return e.atomic(ctx, func(e *executor) error { return e.insertExecutions(ctx, state, rows) })
}

// insertExecutions writes rows to state's table, many per statement. At
// is the ready or blocked row's creation time, or the scheduled time.
func (e *executor) insertExecutions(ctx context.Context, state driver.State, rows []driver.Execution) error {
	var query string
	var width int
	switch state {
	case driver.Ready:
		query, width = e.q.insertReady, 4
	case driver.Scheduled:
		query, width = e.q.insertScheduled, 4
	case driver.Blocked:
		query, width = e.q.insertBlocked, 5
	default:
		return fmt.Errorf("insert executions: unknown state %d", state)
	}
	for chunk := range chunks(rows) {
		args := make([]any, 0, len(chunk)*width)
		for _, r := range chunk {
			args = append(args, r.JobID, []byte(r.Queue), r.Priority)
			if state == driver.Blocked {
				if err := checkKey(r.Key); err != nil {
					return fmt.Errorf("insert execution of job %d: %w", r.JobID, err)
				}
				args = append(args, []byte(r.Key))
			}
			args = append(args, micros(r.At))
		}
		if _, err := e.db.ExecContext(ctx, query+values(len(chunk), width), args...); err != nil {
			return fmt.Errorf("insert executions: %w", err)
		}
	}
	return nil
}

// scanJob reads jobColumns, then extra.
func scanJob(scan func(...any) error, j *driver.Job, extra ...any) error {
	var durMS, scheduled, created int64
	var conflict int
	var args []byte
	dest := append([]any{&j.ID, &j.Kind, &j.Queue, &args, &j.Priority, &j.Attempt, &j.MaxAttempts,
		&j.Limit.Key, &j.Limit.To, &durMS, &conflict, &j.Limit.MaxBlocked, &scheduled, &created}, extra...)
	if err := scan(dest...); err != nil {
		return err
	}
	j.Args = args
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

func (e *executor) queryJobs(ctx context.Context, query string, args ...any) ([]*driver.Job, error) {
	rows, err := e.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.Job
	for rows.Next() {
		j := &driver.Job{}
		if err := scanJob(rows.Scan, j); err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// queryColumn reads the first column of every row.
func queryColumn[T any](ctx context.Context, db dbtx, query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (e *executor) ClaimReady(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	var claims []*driver.Claim
	err := e.atomic(ctx, func(e *executor) error {
		claims = nil
		picked, err := queryColumn[int64](ctx, e.db, e.q.pickReady, []byte(p.Queue), p.Max)
		if err != nil || len(picked) == 0 {
			return err
		}
		if _, err := execIn(ctx, e, e.q.deleteReady, picked); err != nil {
			return err
		}
		args := make([]any, 0, 4*len(picked))
		for _, id := range picked {
			args = append(args, id, []byte(p.Queue), p.ProcessID, micros(p.Now))
		}
		if _, err := e.db.ExecContext(ctx, e.q.insertClaims+values(len(picked), 4), args...); err != nil {
			return err
		}
		claims, err = e.queryClaims(ctx, in(e.q.selectClaims, len(picked)), anys(picked)...)
		return err
	})
	return claims, err
}

func (e *executor) HasReady(ctx context.Context, queue string) (bool, error) {
	var any bool
	err := e.db.QueryRowContext(ctx, e.q.hasReady, []byte(queue)).Scan(&any)
	return any, err
}

func (e *executor) QueueCap(ctx context.Context, queue string) (int, error) {
	var limit int
	err := e.db.QueryRowContext(ctx, e.q.lockCap, []byte(queue)).Scan(&limit)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return limit, err
}

func (e *executor) CountClaimed(ctx context.Context, queue string) (int, error) {
	var n int
	err := e.db.QueryRowContext(ctx, e.q.countClaimed, []byte(queue)).Scan(&n)
	return n, err
}

func (e *executor) CompleteClaims(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Fenced, error) {
	var matched []driver.Fenced
	err := e.atomic(ctx, func(e *executor) error {
		matched = matched[:0]
		for _, c := range claims {
			ok, err := e.DeleteClaim(ctx, c.ID, c.Fence)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if keep {
				err = e.FinishJob(ctx, c.ID, now, false)
			} else {
				_, err = execIn(ctx, e, e.q.deleteJobs, []int64{c.ID})
			}
			if err != nil {
				return err
			}
			matched = append(matched, driver.Fenced{JobID: c.ID, Fence: c.Fence})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("complete %d jobs: %w", len(claims), err)
	}
	return matched, nil
}

func (e *executor) DeleteClaim(ctx context.Context, jobID, fence int64) (bool, error) {
	n, err := e.exec(ctx, e.q.deleteClaim, fence, jobID)
	if err != nil {
		return false, fmt.Errorf("delete claim of job %d: %w", jobID, err)
	}
	return n == 1, nil
}

func (e *executor) FinishJob(ctx context.Context, jobID int64, now time.Time, discarded bool) error {
	attempt := 1
	if discarded {
		attempt = 0
	}
	if _, err := e.exec(ctx, e.q.finishJob, attempt, micros(now), discarded, jobID); err != nil {
		return fmt.Errorf("finish job %d: %w", jobID, err)
	}
	return nil
}

func (e *executor) DeleteJobs(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	err := e.atomic(ctx, func(e *executor) error {
		_, err := execIn(ctx, e, e.q.deleteJobs, ids)
		return err
	})
	if err != nil {
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
	if err := checkKey(l.Key); err != nil {
		return fmt.Errorf("create semaphore: %w", err)
	}
	_, err := e.exec(ctx, e.q.semEnsure, hash(l.Key), []byte(l.Key), max(l.To, 1), max(l.To, 1), l.Duration.Milliseconds(),
		micros(now.Add(l.Duration)))
	if err != nil {
		return fmt.Errorf("create semaphore %q: %w", l.Key, err)
	}
	return nil
}

// SemaphoreLock reads the row with FOR UPDATE; outside a transaction the
// lock ends with the statement.
func (e *executor) SemaphoreLock(ctx context.Context, key, queue string) (driver.Semaphore, bool, error) {
	s := driver.Semaphore{Key: key}
	var durMS, expires int64
	var policyQueue []byte
	q := []byte(queue)
	err := e.db.QueryRowContext(ctx, e.q.semLock, q, q, q, hash(key), []byte(key)).Scan(&s.Value, &s.Limit, &s.Blocked,
		&durMS, &expires, &s.Override, &policyQueue, &s.Policy.MaxActivePerKey, &s.Policy.MaxBlocked)
	s.Policy.Queue = string(policyQueue)
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
	err := e.db.QueryRowContext(ctx, e.q.semTryLock, hash(key), []byte(key)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock semaphore %q: %w", key, err)
	}
	return true, nil
}

func (e *executor) SemaphoreSave(ctx context.Context, s driver.Semaphore) error {
	_, err := e.exec(ctx, e.q.semSave, s.Value, s.Limit, s.Blocked, s.Duration.Milliseconds(), micros(s.ExpiresAt), hash(s.Key))
	if err != nil {
		return fmt.Errorf("save semaphore %q: %w", s.Key, err)
	}
	return nil
}

func (e *executor) PromoteBlocked(ctx context.Context, key string, n int, now time.Time) (driver.Promotion, error) {
	var moved driver.Promotion
	err := e.atomic(ctx, func(e *executor) error {
		moved = driver.Promotion{}
		rows, err := e.db.QueryContext(ctx, e.q.pickBlocked, hash(key), n)
		if err != nil {
			return err
		}
		var picked []driver.Execution
		for rows.Next() {
			r := driver.Execution{Key: key, At: now}
			var queue []byte
			if err := rows.Scan(&r.JobID, &queue, &r.Priority); err != nil {
				rows.Close()
				return err
			}
			r.Queue = string(queue)
			picked = append(picked, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(picked) == 0 {
			return err
		}
		ids := make([]int64, len(picked))
		for i, r := range picked {
			ids[i] = r.JobID
		}
		deleted, err := execIn(ctx, e, e.q.deleteBlocked, ids)
		if err != nil {
			return err
		}
		if deleted != int64(len(picked)) {
			return fmt.Errorf("%d of %d blocked rows vanished under the semaphore lock", int64(len(picked))-deleted, len(picked))
		}
		if err := e.insertExecutions(ctx, driver.Ready, picked); err != nil {
			return err
		}
		for _, r := range picked {
			moved.Jobs++
			moved.AddQueue(r.Queue)
		}
		return nil
	})
	if err != nil {
		return driver.Promotion{}, fmt.Errorf("promote blocked jobs of %q: %w", key, err)
	}
	return moved, nil
}

func (e *executor) CountHolders(ctx context.Context, key string) (int, int, error) {
	var holders, blocked int
	h := hash(key)
	if err := e.db.QueryRowContext(ctx, e.q.countHolders, h, h, h).Scan(&holders, &blocked); err != nil {
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
		out = nil
		due, err := queryColumn[int64](ctx, e.db, e.q.pickDueScheduled, micros(now), max)
		if err != nil || len(due) == 0 {
			return err
		}
		if _, err := execIn(ctx, e, e.q.deleteScheduled, due); err != nil {
			return err
		}
		out, err = e.queryJobs(ctx, in(e.q.selectJobs, len(due)), anys(due)...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("take due scheduled jobs: %w", err)
	}
	return out, nil
}

func (e *executor) keys(ctx context.Context, what, query string, args ...any) ([]string, error) {
	keys, err := queryColumn[string](ctx, e.db, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s semaphores: %w", what, err)
	}
	return keys, nil
}

func (e *executor) ExpiredSemaphores(ctx context.Context, now time.Time, after string, max int) ([]string, error) {
	return e.keys(ctx, "expired", e.q.expiredSems, micros(now), []byte(after), max)
}

func (e *executor) PromotableSemaphores(ctx context.Context, after string, max int) ([]string, error) {
	return e.keys(ctx, "promotable", e.q.promotableSems, []byte(after), max)
}

func (e *executor) DeleteIdleSemaphores(ctx context.Context, now time.Time, max int) (int, error) {
	var n int64
	err := e.atomic(ctx, func(e *executor) error {
		n = 0
		idle, err := queryColumn[[]byte](ctx, e.db, e.q.pickIdleSems, micros(now), max)
		if err != nil || len(idle) == 0 {
			return err
		}
		n, err = execIn(ctx, e, e.q.deleteSems, idle)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete idle semaphores: %w", err)
	}
	return int(n), nil
}

// lockLost locks the claims whose fences the query lists, skipping those
// someone holds, and reads them.
func (e *executor) lockLost(ctx context.Context, query string, args ...any) ([]*driver.Claim, error) {
	var claims []*driver.Claim
	err := e.atomic(ctx, func(e *executor) error {
		claims = nil
		fences, err := queryColumn[int64](ctx, e.db, query, args...)
		if err != nil || len(fences) == 0 {
			return err
		}
		locked, err := queryColumn[int64](ctx, e.db, in(e.q.lockClaims, len(fences)), anys(fences)...)
		if err != nil || len(locked) == 0 {
			return err
		}
		claims, err = e.queryClaims(ctx, in(e.q.selectLockedClaims, len(locked)), anys(locked)...)
		return err
	})
	return claims, err
}

func (e *executor) LostClaims(ctx context.Context, now time.Time, deadAfter time.Duration, max int) ([]*driver.Claim, error) {
	d := deadAfter.Milliseconds()
	claims, err := e.lockLost(ctx, e.q.lostClaims, micros(now), d, d, max)
	if err != nil {
		return nil, fmt.Errorf("find claims of dead processes: %w", err)
	}
	return claims, nil
}

func (e *executor) LostClaimsOfKey(ctx context.Context, key string, now time.Time, silence time.Duration) ([]*driver.Claim, error) {
	d := silence.Milliseconds()
	claims, err := e.lockLost(ctx, e.q.lostClaimsOfKey, hash(key), micros(now), d, d)
	if err != nil {
		return nil, fmt.Errorf("find lost claims of %q: %w", key, err)
	}
	return claims, nil
}

func (e *executor) DeleteFinishedJobs(ctx context.Context, before time.Time, max int) (int, error) {
	n, err := e.exec(ctx, e.q.deleteFinished, micros(before), max)
	if err != nil {
		return 0, fmt.Errorf("delete finished jobs: %w", err)
	}
	return int(n), nil
}

func (e *executor) RegisterProcess(ctx context.Context, p driver.Process) (int64, error) {
	res, err := e.write(ctx, e.q.registerProcess, p.Kind, p.Name, p.Hostname, p.PID, p.Queues,
		p.HeartbeatInterval.Milliseconds(), p.DeadAfter.Milliseconds(), micros(p.StartedAt), micros(p.StartedAt),
		micros(p.StartedAt))
	if err != nil {
		return 0, fmt.Errorf("register process: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("register process: %w", err)
	}
	return id, nil
}

// Heartbeat writes the beat in a transaction of its own, so the process
// row is locked only for that statement: a renewal waiting on semaphores
// never holds up a reaper's read of the row, and a process frozen while
// renewing holds nothing a dispatcher needs.
func (e *executor) Heartbeat(ctx context.Context, b driver.Beat) (bool, error) {
	res, err := e.write(ctx, e.q.heartbeat, micros(b.At), micros(b.BeatingSince), b.ProcessID)
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	// MySQL counts changed rows: a beat at the same instant as the last
	// changes nothing, yet the process is there.
	if n == 0 {
		var found bool
		if err := e.db.QueryRowContext(ctx, e.q.processExists, b.ProcessID).Scan(&found); err != nil || !found {
			return false, err
		}
	}
	return true, nil
}

func (e *executor) RenewHeld(ctx context.Context, processID int64, at time.Time, renewBelow float64) error {
	err := e.atomic(ctx, func(e *executor) error {
		keys, err := queryColumn[[]byte](ctx, e.db, e.q.heldKeys, processID)
		if err != nil || len(keys) == 0 {
			return err
		}
		renew, err := queryColumn[[]byte](ctx, e.db, in(e.q.pickRenewable, len(keys)), append(anys(keys), micros(at), renewBelow)...)
		if err != nil || len(renew) == 0 {
			return err
		}
		_, err = e.db.ExecContext(ctx, in(e.q.renewSems, len(renew)), append([]any{micros(at)}, anys(renew)...)...)
		return err
	})
	if err != nil {
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
	return nil
}

func (e *executor) DeleteDeadProcesses(ctx context.Context, now time.Time, deadAfter time.Duration) (int, error) {
	var n int64
	err := e.atomic(ctx, func(e *executor) error {
		n = 0
		d := deadAfter.Milliseconds()
		seen, err := e.processBeats(ctx, e.q.deadProcesses, micros(now), d, d)
		if err != nil || len(seen) == 0 {
			return err
		}
		ids := make([]int64, 0, len(seen))
		for id := range seen {
			ids = append(ids, id)
		}
		locked, err := e.processBeats(ctx, in(e.q.lockProcesses, len(ids)), anys(ids)...)
		if err != nil {
			return err
		}
		// Only those that have not beaten since they were found dead.
		ids = ids[:0]
		for id, beat := range locked {
			if beat == seen[id] {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		n, err = execIn(ctx, e, e.q.deleteProcesses, ids)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete dead processes: %w", err)
	}
	return int(n), nil
}

// processBeats reads (id, last_heartbeat_at) rows.
func (e *executor) processBeats(ctx context.Context, query string, args ...any) (map[int64]int64, error) {
	rows, err := e.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var id, beat int64
		if err := rows.Scan(&id, &beat); err != nil {
			return nil, err
		}
		out[id] = beat
	}
	return out, rows.Err()
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
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return out, nil
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
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs by queue: %w", err)
	}
	return out, nil
}

// errNoSuchTable is ER_NO_SUCH_TABLE.
const errNoSuchTable = 1146

func (e *executor) SchemaVersion(ctx context.Context) (int64, error) {
	var v int64
	err := e.db.QueryRowContext(ctx, e.q.schemaVersion).Scan(&v)
	if myErr := (*gomysql.MySQLError)(nil); errors.As(err, &myErr) && myErr.Number == errNoSuchTable {
		return 0, nil // never migrated
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
