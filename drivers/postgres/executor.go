package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq/internal/driver"
)

// dbtx is what a pool and a transaction have in common.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type executor struct {
	db     dbtx
	q      *queries
	txIdle string // for the transactions it begins itself (see pipeTx)
}

// MaxKeyBytes is the longest concurrency key (Group + "/" + Key) the
// PostgreSQL driver stores: its b-tree indexes hold at most 2704 bytes a
// row, so longer keys are refused at enqueue, never truncated. bq.MaxKeyBytes,
// checked before any driver is reached, is the limit users meet; this one
// is a backstop.
const MaxKeyBytes = 2048

func checkKey(key string) error {
	if len(key) > MaxKeyBytes {
		return fmt.Errorf("concurrency key %.40q... is %d bytes long: the PostgreSQL driver stores keys of at most %d bytes (Group + \"/\" + Key); use a shorter key, e.g. a hash of the long one",
			key, len(key), MaxKeyBytes)
	}
	return nil
}

// write runs a statement whose result the engine does not read. In a
// transaction bq owns it is queued and sent with the next statement or
// the commit (see pipeTx); elsewhere it runs at once.
func (e *executor) write(ctx context.Context, sql string, args ...any) error {
	if tx, ok := e.db.(*pipeTx); ok {
		tx.queue(sql, args)
		return nil
	}
	_, err := e.db.Exec(ctx, sql, args...)
	return err
}

func (e *executor) InsertJobs(ctx context.Context, now time.Time, jobs []*driver.NewJob) error {
	n := len(jobs)
	if n == 0 {
		return nil
	}
	for _, j := range jobs {
		if err := checkKey(j.Limit.Key); err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
	}
	var (
		kinds, queues, keys        = make([]string, n), make([]string, n), make([]string, n)
		args                       = make([]string, n)
		prios, maxAttempts, limits = make([]int32, n), make([]int32, n), make([]int32, n)
		durations                  = make([]int64, n)
		conflicts, states          = make([]int16, n), make([]int16, n)
		scheduled                  = make([]time.Time, n)
		maxBlocked                 = make([]int32, n)
	)
	for i, j := range jobs {
		kinds[i], queues[i], args[i] = j.Kind, j.Queue, string(j.Args)
		prios[i], maxAttempts[i] = int32(j.Priority), int32(j.MaxAttempts)
		keys[i], limits[i], durations[i] = j.Limit.Key, int32(j.Limit.To), j.Limit.Duration.Milliseconds()
		conflicts[i], states[i] = int16(j.Limit.OnConflict), int16(j.State)
		maxBlocked[i] = int32(j.Limit.MaxBlocked)
		scheduled[i] = j.ScheduledAt
	}
	rows, err := e.db.Query(ctx, e.q.insertJobs, kinds, queues, args, prios, maxAttempts, keys,
		limits, durations, conflicts, scheduled, states, now, maxBlocked)
	if err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	i := 0
	for rows.Next() {
		if err := rows.Scan(&jobs[i].ID); err != nil {
			rows.Close()
			return fmt.Errorf("insert jobs: %w", err)
		}
		i++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	if i != n {
		return fmt.Errorf("insert jobs: %d ids returned for %d jobs", i, n)
	}
	return nil
}

func (e *executor) InsertExecutions(ctx context.Context, state driver.State, rows []driver.Execution) error {
	if len(rows) == 0 {
		return nil
	}
	ids, queues, prios := make([]int64, len(rows)), make([]string, len(rows)), make([]int32, len(rows))
	for i, r := range rows {
		ids[i], queues[i], prios[i] = r.JobID, r.Queue, int32(r.Priority)
	}
	var err error
	switch state {
	case driver.Ready:
		now := make([]time.Time, len(rows))
		for i, r := range rows {
			now[i] = r.At
		}
		err = e.write(ctx, e.q.insertReady, ids, queues, prios, now)
	case driver.Scheduled:
		at := make([]time.Time, len(rows))
		for i, r := range rows {
			at[i] = r.At
		}
		err = e.write(ctx, e.q.insertScheduled, ids, queues, prios, at)
	case driver.Blocked:
		keys, at := make([]string, len(rows)), make([]time.Time, len(rows))
		for i, r := range rows {
			keys[i], at[i] = r.Key, r.At
		}
		err = e.write(ctx, e.q.insertBlocked, ids, queues, prios, keys, at)
	default:
		return fmt.Errorf("insert executions: unknown state %d", state)
	}
	if err != nil {
		return fmt.Errorf("insert executions: %w", err)
	}
	return nil
}

// scanJob reads jobColumns, then extra.
func scanJob(row pgx.Row, j *driver.Job, extra ...any) error {
	var durMS int64
	var conflict int16
	dest := append([]any{&j.ID, &j.Kind, &j.Queue, &j.Args, &j.Priority, &j.Attempt, &j.MaxAttempts,
		&j.Limit.Key, &j.Limit.To, &durMS, &conflict, &j.Limit.MaxBlocked, &j.ScheduledAt, &j.CreatedAt}, extra...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	j.Limit.Duration = time.Duration(durMS) * time.Millisecond
	j.Limit.OnConflict = driver.OnConflict(conflict)
	return nil
}

func collectClaims(rows pgx.Rows, withClaimedAt bool, now time.Time) ([]*driver.Claim, error) {
	defer rows.Close()
	var out []*driver.Claim
	for rows.Next() {
		c := &driver.Claim{ClaimedAt: now}
		extra := []any{&c.Fence}
		if withClaimedAt {
			extra = append(extra, &c.ClaimedAt)
		}
		if err := scanJob(rows, &c.Job, extra...); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ClaimUncapped is the one-statement claim: it leaves queues with a
// MaxActive alone, so uncapped queues pay one index probe for the feature.
func (e *executor) ClaimUncapped(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	return e.claim(ctx, e.q.claimUncapped, p)
}

func (e *executor) ClaimReady(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	return e.claim(ctx, e.q.claimReady, p)
}

func (e *executor) claim(ctx context.Context, query string, p driver.ClaimParams) ([]*driver.Claim, error) {
	rows, err := e.db.Query(ctx, query, p.Queue, p.Max, p.ProcessID, p.Now)
	if err != nil {
		return nil, err
	}
	return collectClaims(rows, false, p.Now)
}

func (e *executor) HasReady(ctx context.Context, queue string) (bool, error) {
	var any bool
	err := e.db.QueryRow(ctx, e.q.hasReady, queue).Scan(&any)
	return any, err
}

// QueueCap locks the policy row only inside a transaction: outside one
// (the pool) a lock would end with its statement.
func (e *executor) QueueCap(ctx context.Context, queue string) (int, error) {
	query := e.q.lockPolicyCap
	if _, pool := e.db.(*pgxpool.Pool); pool {
		query = e.q.policyCap
	}
	var limit int
	if err := e.db.QueryRow(ctx, query, queue).Scan(&limit); err != nil {
		return 0, fmt.Errorf("read the cap of queue %q: %w", queue, err)
	}
	return limit, nil
}

func (e *executor) CountClaimed(ctx context.Context, queue string) (int, error) {
	var n int
	if err := e.db.QueryRow(ctx, e.q.countClaimed, queue).Scan(&n); err != nil {
		return 0, fmt.Errorf("count running jobs of queue %q: %w", queue, err)
	}
	return n, nil
}

func (e *executor) CompleteClaims(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Fenced, error) {
	ids, fences := make([]int64, len(claims)), make([]int64, len(claims))
	for i, c := range claims {
		ids[i], fences[i] = c.ID, c.Fence
	}
	query, args := e.q.completeClaims, []any{ids, fences, now}
	if !keep {
		query, args = e.q.completeDelete, args[:2]
	}
	rows, err := e.db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("complete %d jobs: %w", len(claims), err)
	}
	matched, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (driver.Fenced, error) {
		var f driver.Fenced
		return f, row.Scan(&f.JobID, &f.Fence)
	})
	if err != nil {
		return nil, fmt.Errorf("complete %d jobs: %w", len(claims), err)
	}
	return matched, nil
}

func (e *executor) DeleteClaim(ctx context.Context, jobID, fence int64) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteClaim, jobID, fence)
	if err != nil {
		return false, fmt.Errorf("delete claim of job %d: %w", jobID, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) FinishJob(ctx context.Context, jobID int64, now time.Time, discarded bool) error {
	if err := e.write(ctx, e.q.finishJob, jobID, now, discarded); err != nil {
		return fmt.Errorf("finish job %d: %w", jobID, err)
	}
	return nil
}

func (e *executor) DeleteJobs(ctx context.Context, ids []int64) error {
	if err := e.write(ctx, e.q.deleteJobs, ids); err != nil {
		return fmt.Errorf("delete jobs: %w", err)
	}
	return nil
}

func (e *executor) RecordError(ctx context.Context, jobID int64, msg string) error {
	if err := e.write(ctx, e.q.recordError, jobID, msg); err != nil {
		return fmt.Errorf("record error of job %d: %w", jobID, err)
	}
	return nil
}

func (e *executor) InsertFailed(ctx context.Context, jobID int64, msg string, now time.Time) error {
	if err := e.write(ctx, e.q.insertFailed, jobID, msg, now); err != nil {
		return fmt.Errorf("move job %d to failed: %w", jobID, err)
	}
	return nil
}

func (e *executor) SemaphoreEnsure(ctx context.Context, l driver.Limit, now time.Time) error {
	if err := checkKey(l.Key); err != nil {
		return fmt.Errorf("create semaphore: %w", err)
	}
	if err := e.write(ctx, e.q.semEnsure, l.Key, max(l.To, 1), l.Duration.Milliseconds(), now.Add(l.Duration)); err != nil {
		return fmt.Errorf("create semaphore %q: %w", l.Key, err)
	}
	return nil
}

func (e *executor) SemaphoreLock(ctx context.Context, key, queue string) (driver.Semaphore, bool, error) {
	s := driver.Semaphore{Key: key}
	var durMS int64
	err := e.db.QueryRow(ctx, e.q.semLock, key, queue).Scan(&s.Value, &s.Limit, &s.Blocked, &durMS, &s.ExpiresAt,
		&s.Override, &s.Policy.Queue, &s.Policy.MaxActivePerKey, &s.Policy.MaxBlocked)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("lock semaphore %q: %w", key, err)
	}
	s.Duration = time.Duration(durMS) * time.Millisecond
	return s, true, nil
}

func (e *executor) SemaphoreTryLock(ctx context.Context, key string) (bool, error) {
	var one int
	err := e.db.QueryRow(ctx, e.q.semTryLock, key).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock semaphore %q: %w", key, err)
	}
	return true, nil
}

func (e *executor) SemaphoreSave(ctx context.Context, s driver.Semaphore) error {
	err := e.write(ctx, e.q.semSave, s.Key, s.Value, s.Limit, s.Blocked, s.Duration.Milliseconds(), s.ExpiresAt)
	if err != nil {
		return fmt.Errorf("save semaphore %q: %w", s.Key, err)
	}
	return nil
}

func (e *executor) PromoteBlocked(ctx context.Context, key string, n int, now time.Time) (driver.Promotion, error) {
	var p driver.Promotion
	rows, err := e.db.Query(ctx, e.q.promoteBlocked, key, n, now)
	if err != nil {
		return p, fmt.Errorf("promote blocked jobs of %q: %w", key, err)
	}
	queues, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return p, fmt.Errorf("promote blocked jobs of %q: %w", key, err)
	}
	for _, q := range queues {
		p.Jobs++
		p.AddQueue(q)
	}
	return p, nil
}

func (e *executor) ReleaseMany(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	n := make([]int32, len(counts))
	for i, c := range counts {
		n[i] = int32(c)
	}
	// Queued in bq's pipelined transaction: it goes out in one round trip
	// with the promotion that follows.
	if err := e.write(ctx, e.q.releaseMany, keys, n); err != nil {
		return nil, fmt.Errorf("release %d keys: %w", len(keys), err)
	}
	rows, err := e.db.Query(ctx, e.q.promoteMany, keys, now)
	if err != nil {
		return nil, fmt.Errorf("promote blocked jobs of %d keys: %w", len(keys), err)
	}
	moved := map[string]driver.Promotion{}
	for rows.Next() {
		var key string
		var p driver.Promotion
		if err := rows.Scan(&key, &p.Jobs, &p.Queues); err != nil {
			rows.Close()
			return nil, fmt.Errorf("promote blocked jobs of %d keys: %w", len(keys), err)
		}
		moved[key] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("promote blocked jobs of %d keys: %w", len(keys), err)
	}
	out := make([]driver.Promotion, len(keys))
	for i, k := range keys {
		out[i] = moved[k]
	}
	return out, nil
}

func (e *executor) CountHolders(ctx context.Context, key string) (int, int, error) {
	var holders, blocked int
	if err := e.db.QueryRow(ctx, e.q.countHolders, key).Scan(&holders, &blocked); err != nil {
		return 0, 0, fmt.Errorf("count holders of %q: %w", key, err)
	}
	return holders, blocked, nil
}

func (e *executor) HasDueScheduled(ctx context.Context, now time.Time) (bool, error) {
	var due bool
	if err := e.db.QueryRow(ctx, e.q.hasDueScheduled, now).Scan(&due); err != nil {
		return false, fmt.Errorf("look for due scheduled jobs: %w", err)
	}
	return due, nil
}

func (e *executor) TakeDueScheduled(ctx context.Context, now time.Time, max int) ([]*driver.Job, error) {
	rows, err := e.db.Query(ctx, e.q.takeDueScheduled, now, max)
	if err != nil {
		return nil, fmt.Errorf("take due scheduled jobs: %w", err)
	}
	defer rows.Close()
	var out []*driver.Job
	for rows.Next() {
		j := &driver.Job{}
		if err := scanJob(rows, j); err != nil {
			return nil, fmt.Errorf("take due scheduled jobs: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("take due scheduled jobs: %w", err)
	}
	return out, nil
}

func (e *executor) keys(ctx context.Context, what, query string, args ...any) ([]string, error) {
	rows, err := e.db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s semaphores: %w", what, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list %s semaphores: %w", what, err)
	}
	return keys, nil
}

func (e *executor) ExpiredSemaphores(ctx context.Context, now time.Time, after string, max int) ([]string, error) {
	return e.keys(ctx, "expired", e.q.expiredSems, now, after, max)
}

func (e *executor) PromotableSemaphores(ctx context.Context, after string, max int) ([]string, error) {
	return e.keys(ctx, "promotable", e.q.promotableSems, after, max)
}

func (e *executor) DeleteIdleSemaphores(ctx context.Context, now time.Time, max int) (int, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteIdleSems, now, max)
	if err != nil {
		return 0, fmt.Errorf("delete idle semaphores: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func (e *executor) LostClaims(ctx context.Context, now time.Time, deadAfter time.Duration, max int) ([]*driver.Claim, error) {
	rows, err := e.db.Query(ctx, e.q.lostClaims, now, deadAfter.Milliseconds(), max)
	if err != nil {
		return nil, fmt.Errorf("find claims of dead processes: %w", err)
	}
	claims, err := collectClaims(rows, true, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("find claims of dead processes: %w", err)
	}
	return claims, nil
}

func (e *executor) LostClaimsOfKey(ctx context.Context, key string, now time.Time, silence time.Duration) ([]*driver.Claim, error) {
	rows, err := e.db.Query(ctx, e.q.lostClaimsOfKey, now, key, silence.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("find lost claims of %q: %w", key, err)
	}
	claims, err := collectClaims(rows, true, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("find lost claims of %q: %w", key, err)
	}
	return claims, nil
}

func (e *executor) DeleteFinishedJobs(ctx context.Context, before time.Time, max int) (int, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteFinished, before, max)
	if err != nil {
		return 0, fmt.Errorf("delete finished jobs: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func (e *executor) RegisterProcess(ctx context.Context, p driver.Process) (int64, error) {
	var id int64
	err := e.db.QueryRow(ctx, e.q.registerProcess, p.Kind, p.Name, p.Hostname, p.PID, p.Queues,
		p.HeartbeatInterval.Milliseconds(), p.DeadAfter.Milliseconds(), p.StartedAt).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("register process: %w", err)
	}
	return id, nil
}

func (e *executor) Heartbeat(ctx context.Context, b driver.Beat) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.heartbeat, b.ProcessID, b.At, b.BeatingSince)
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

func (e *executor) RenewHeld(ctx context.Context, processID int64, at time.Time, renewBelow float64) error {
	if _, err := e.db.Exec(ctx, e.q.renewSems, processID, at, renewBelow); err != nil {
		return fmt.Errorf("renew semaphores: %w", err)
	}
	return nil
}

func (e *executor) ClaimsOfProcess(ctx context.Context, processID int64) ([]driver.OwnClaim, error) {
	rows, err := e.db.Query(ctx, e.q.claimsOfProcess, processID)
	if err != nil {
		return nil, fmt.Errorf("list claims of process %d: %w", processID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (driver.OwnClaim, error) {
		var c driver.OwnClaim
		err := r.Scan(&c.JobID, &c.Fence, &c.ClaimedAt)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("list claims of process %d: %w", processID, err)
	}
	return out, nil
}

func (e *executor) DeregisterProcess(ctx context.Context, processID int64) error {
	if _, err := e.db.Exec(ctx, e.q.deregisterProcess, processID); err != nil {
		return fmt.Errorf("deregister process %d: %w", processID, err)
	}
	return nil
}

func (e *executor) DeleteDeadProcesses(ctx context.Context, now time.Time, deadAfter time.Duration) (int, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteDeadProcesses, now, deadAfter.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("delete dead processes: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func (e *executor) ListProcesses(ctx context.Context) ([]driver.Process, error) {
	rows, err := e.db.Query(ctx, e.q.listProcesses)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	defer rows.Close()
	var out []driver.Process
	for rows.Next() {
		var p driver.Process
		var hbMS, deadMS int64
		if err := rows.Scan(&p.ID, &p.Kind, &p.Name, &p.Hostname, &p.PID, &p.Queues, &hbMS, &deadMS,
			&p.StartedAt, &p.LastHeartbeatAt, &p.BeatingSince); err != nil {
			return nil, fmt.Errorf("list processes: %w", err)
		}
		p.HeartbeatInterval = time.Duration(hbMS) * time.Millisecond
		p.DeadAfter = time.Duration(deadMS) * time.Millisecond
		out = append(out, p)
	}
	return out, rows.Err()
}

func (e *executor) GetJob(ctx context.Context, id int64) (*driver.JobInfo, bool, error) {
	info := &driver.JobInfo{}
	var state string
	err := scanJob(e.db.QueryRow(ctx, e.q.getJob, id), &info.Job, &info.LastError, &info.FinishedAt, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get job %d: %w", id, err)
	}
	info.State = driver.JobState(state)
	return info, true, nil
}

func (e *executor) CountByQueue(ctx context.Context) ([]driver.QueueCounts, error) {
	rows, err := e.db.Query(ctx, e.q.countByQueue)
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
	err := e.db.QueryRow(ctx, e.q.schemaVersion).Scan(&v)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return 0, nil // undefined_table: never migrated
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

func scanPolicy(row pgx.Row) (driver.Policy, error) {
	var p driver.Policy
	err := row.Scan(&p.Queue, &p.Namespace, &p.MaxActive, &p.MaxActivePerKey, &p.MaxBlocked, &p.CreatedAt, &p.UpdatedAt)
	return p, err
}

func (e *executor) policies(ctx context.Context, query string, args ...any) ([]driver.Policy, error) {
	rows, err := e.db.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []driver.Policy
	for rows.Next() {
		p, err := scanPolicy(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func (e *executor) LockPolicies(ctx context.Context, namespace string, queues []string) ([]driver.Policy, error) {
	out, err := e.policies(ctx, e.q.lockPolicies, namespace, queues)
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
	tag, err := e.db.Exec(ctx, e.q.insertPolicy, p.Queue, p.Namespace, p.MaxActive, p.MaxActivePerKey, p.MaxBlocked, p.UpdatedAt)
	if err != nil {
		return false, fmt.Errorf("insert policy of queue %q: %w", p.Queue, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) UpdatePolicy(ctx context.Context, p driver.Policy) error {
	if _, err := e.db.Exec(ctx, e.q.updatePolicy, p.Queue, p.MaxActive, p.MaxActivePerKey, p.MaxBlocked, p.UpdatedAt); err != nil {
		return fmt.Errorf("update policy of queue %q: %w", p.Queue, err)
	}
	return nil
}

func (e *executor) DeletePolicy(ctx context.Context, queue string) error {
	if _, err := e.db.Exec(ctx, e.q.deletePolicy, queue); err != nil {
		return fmt.Errorf("delete policy of queue %q: %w", queue, err)
	}
	return nil
}

func (e *executor) PolicyKeys(ctx context.Context, queue string) ([]string, error) {
	return e.keys(ctx, "policy-limited", e.q.policyKeys, queue)
}

func (e *executor) SetKeyLimit(ctx context.Context, key string, limit int, now time.Time) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("set key limit: %w", err)
	}
	if _, err := e.db.Exec(ctx, e.q.setKeyLimit, key, limit, now); err != nil {
		return fmt.Errorf("set limit of key %q: %w", key, err)
	}
	return nil
}

func (e *executor) DeleteKeyLimit(ctx context.Context, key string) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteKeyLimit, key)
	if err != nil {
		return false, fmt.Errorf("clear limit of key %q: %w", key, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) LatestJobLimit(ctx context.Context, key string) (driver.Limit, string, bool, error) {
	var j driver.Job
	err := scanJob(e.db.QueryRow(ctx, e.q.latestJobLimit, key), &j)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Limit{}, "", false, nil
	}
	if err != nil {
		return driver.Limit{}, "", false, fmt.Errorf("read the newest job of key %q: %w", key, err)
	}
	return j.Limit, j.Queue, true, nil
}
