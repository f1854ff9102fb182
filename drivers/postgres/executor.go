package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
)

// dbtx is what a pool and a transaction have in common.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type executor struct {
	// Shared runs the statements every dialect runs alike, on db (conn).
	sqlexec.Shared

	db     dbtx
	q      *queries
	txIdle string        // for the transactions it begins itself (see pipeTx)
	plans  *genericPlans // nil: leave the plan to the server (collectGeneric)
}

func newExecutor(db dbtx, q *queries) executor {
	return executor{Shared: sqlexec.NewShared(conn{db, q}, &q.SharedQueries), db: db, q: q}
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

// collect reads every row of query with scan.
func collect[T any](ctx context.Context, db dbtx, scan pgx.RowToFunc[T], query string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scan)
}

// found reports whether a one-row read found its row: a missing row is
// no error.
func found(err error) (bool, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// scanJob reads jobColumns, then extra.
func scanJob(row pgx.Row, j *driver.Job, extra ...any) error {
	var durMS, rateMS int64
	var conflict int16
	var more []byte
	dest := append([]any{&j.ID, &j.Kind, &j.Queue, &j.Args, &j.Priority, &j.Attempt, &j.MaxAttempts,
		&j.Limit.Key, &j.Limit.To, &durMS, &conflict, &j.Limit.MaxBlocked, &j.ScheduledAt, &j.CreatedAt,
		&j.Metadata, &j.Tags, &j.Rate.Key, &j.Rate.Limit, &rateMS, &more}, extra...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	var err error
	if j.More, err = driver.DecodeMore(more); err != nil {
		return err
	}
	j.Rate.Period = time.Duration(rateMS) * time.Millisecond
	j.Limit.Duration = time.Duration(durMS) * time.Millisecond
	j.Limit.OnConflict = driver.OnConflict(conflict)
	return nil
}

func (e *executor) InsertJobs(ctx context.Context, now time.Time, jobs []*driver.NewJob) error {
	n := len(jobs)
	if n == 0 {
		return nil
	}
	if err := driver.CheckNewJobs(jobs); err != nil {
		return err
	}
	lean, keyed := true, false
	for _, j := range jobs {
		if err := checkKey(j.Limit.Key); err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
		if err := checkKey(j.Rate.Key); err != nil {
			return fmt.Errorf("insert job: rate %w", err)
		}
		for _, l := range j.More {
			if err := checkKey(l.Key); err != nil {
				return fmt.Errorf("insert job: %w", err)
			}
		}
		lean, keyed = lean && isLean(j, now), keyed || j.Limit.Key != ""
	}
	if lean {
		return e.insertLeanJobs(ctx, now, jobs, keyed)
	}
	var (
		kinds, queues, keys        = make([]string, n), make([]string, n), make([]string, n)
		args                       = make([]string, n)
		prios, maxAttempts, limits = make([]int32, n), make([]int32, n), make([]int32, n)
		durations                  = make([]int64, n)
		conflicts, states          = make([]int16, n), make([]string, n)
		scheduled                  = make([]time.Time, n)
		maxBlocked                 = make([]int32, n)
		metadata, tags             = make([]string, n), make([]string, n)
		rateKeys, lines            = make([]string, n), make([]string, n)
		rateLimits                 = make([]int32, n)
		ratePeriods                = make([]int64, n)
		more                       = make([]string, n)
		// job_keys rows: each multi-key job's keys, by its place (1-based).
		keyOrds []int64
		keyKeys []string
	)
	for i, j := range jobs {
		kinds[i], queues[i], args[i] = j.Kind, j.Queue, string(j.Args)
		prios[i], maxAttempts[i] = int32(j.Priority), int32(j.MaxAttempts)
		keys[i], limits[i], durations[i] = j.Limit.Key, int32(j.Limit.To), j.Limit.Duration.Milliseconds()
		conflicts[i], states[i] = int16(j.Limit.OnConflict), string(j.State)
		maxBlocked[i] = int32(j.Limit.MaxBlocked)
		scheduled[i] = j.ScheduledAt
		metadata[i], tags[i] = string(j.Metadata), string(j.Tags)
		rateKeys[i], rateLimits[i], ratePeriods[i], lines[i] = j.Rate.Key, int32(j.Rate.Limit), j.Rate.Period.Milliseconds(), j.Line
		if len(j.More) == 0 {
			continue
		}
		b, err := driver.EncodeMore(j.More)
		if err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
		more[i] = string(b)
		for _, l := range j.Keys() {
			keyOrds, keyKeys = append(keyOrds, int64(i+1)), append(keyKeys, l.Key)
		}
	}
	return e.setIDs(ctx, jobs, e.q.insertJobs, kinds, queues, args, prios, maxAttempts, keys,
		limits, durations, conflicts, scheduled, states, now, maxBlocked, metadata, tags, rateKeys, rateLimits, ratePeriods, lines,
		more, keyOrds, keyKeys)
}

// isLean reports whether leanInsertJobs writes all of j: no rate,
// metadata, tags, second key or line of its own, and the state the
// statement gives it: scheduled when due later; when due at now, ready
// if unkeyed and pending (admission's to place) if keyed.
func isLean(j *driver.NewJob, now time.Time) bool {
	// As the statement compares them: in whole microseconds.
	due := !j.ScheduledAt.Truncate(time.Microsecond).After(now.Truncate(time.Microsecond))
	want := driver.StateScheduled
	switch {
	case due && j.Limit.Key == "":
		want = driver.StateReady
	case due:
		want = driver.StatePending
	}
	return len(j.More) == 0 && j.Rate.Key == "" && j.Metadata == nil && j.Tags == nil && j.Line == "" && j.State == want
}

// insertLeanJobs inserts jobs that isLean all passes, with the key's
// five columns only when one of them is keyed: a plain bulk enqueue, the
// common case, sends six arrays instead of insertJobs' nineteen.
func (e *executor) insertLeanJobs(ctx context.Context, now time.Time, jobs []*driver.NewJob, keyed bool) error {
	n := len(jobs)
	kinds, queues, args := make([]string, n), make([]string, n), make([]string, n)
	prios, maxAttempts, scheduled := make([]int32, n), make([]int32, n), make([]time.Time, n)
	for i, j := range jobs {
		kinds[i], queues[i], args[i] = j.Kind, j.Queue, string(j.Args)
		prios[i], maxAttempts[i], scheduled[i] = int32(j.Priority), int32(j.MaxAttempts), j.ScheduledAt
	}
	params := []any{now, kinds, queues, args, prios, maxAttempts, scheduled}
	if !keyed {
		return e.setIDs(ctx, jobs, e.q.insertPlainJobs, params...)
	}
	keys, limits, durations := make([]string, n), make([]int32, n), make([]int64, n)
	conflicts, maxBlocked := make([]int16, n), make([]int32, n)
	for i, j := range jobs {
		keys[i], limits[i], durations[i] = j.Limit.Key, int32(j.Limit.To), j.Limit.Duration.Milliseconds()
		conflicts[i], maxBlocked[i] = int16(j.Limit.OnConflict), int32(j.Limit.MaxBlocked)
	}
	return e.setIDs(ctx, jobs, e.q.insertKeyedJobs, append(params, keys, limits, durations, conflicts, maxBlocked)...)
}

// setIDs runs an insert of jobs that returns their ids in input order and
// gives each job its id.
func (e *executor) setIDs(ctx context.Context, jobs []*driver.NewJob, query string, args ...any) error {
	ids, err := collect(ctx, e.db, pgx.RowTo[int64], query, args...)
	if err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	if len(ids) != len(jobs) {
		return fmt.Errorf("insert jobs: %d ids returned for %d jobs", len(ids), len(jobs))
	}
	for i, id := range ids {
		jobs[i].ID = id
	}
	return nil
}

func (e *executor) InsertExecutions(ctx context.Context, state driver.JobState, rows []driver.Execution) error {
	if len(rows) == 0 {
		return nil
	}
	ids, queues, prios := make([]int64, len(rows)), make([]string, len(rows)), make([]int32, len(rows))
	keys, at := make([]string, len(rows)), make([]time.Time, len(rows))
	for i, r := range rows {
		ids[i], queues[i], prios[i], keys[i], at[i] = r.JobID, r.Queue, int32(r.Priority), r.Key, r.At
	}
	var err error
	switch state {
	case driver.StateReady:
		err = e.write(ctx, e.q.insertReady, ids, queues, prios, at)
	case driver.StateScheduled:
		err = e.write(ctx, e.q.insertScheduled, ids, queues, prios, at)
	case driver.StateBlocked:
		err = e.write(ctx, e.q.insertBlocked, ids, queues, prios, keys, at)
	default:
		return fmt.Errorf("insert executions: no execution table for state %q", state)
	}
	if err != nil {
		return fmt.Errorf("insert executions: %w", err)
	}
	return nil
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

func (e *executor) HasDueScheduled(ctx context.Context, now time.Time) (bool, error) {
	var due bool
	if err := e.db.QueryRow(ctx, e.q.hasDueScheduled, now).Scan(&due); err != nil {
		return false, fmt.Errorf("look for due scheduled jobs: %w", err)
	}
	return due, nil
}

func (e *executor) TakeDueScheduled(ctx context.Context, now time.Time, max int) ([]*driver.Job, error) {
	out, err := collect(ctx, e.db, func(r pgx.CollectableRow) (*driver.Job, error) {
		j := &driver.Job{}
		return j, scanJob(r, j)
	}, e.q.takeDueScheduled, now, max)
	if err != nil {
		return nil, fmt.Errorf("take due scheduled jobs: %w", err)
	}
	return out, nil
}

func (e *executor) DeleteFinishedJobs(ctx context.Context, before time.Time, max int) (int, error) {
	var n int
	if err := e.db.QueryRow(ctx, e.q.deleteFinished, before, max).Scan(&n); err != nil {
		return 0, fmt.Errorf("delete finished jobs: %w", err)
	}
	return n, nil
}
