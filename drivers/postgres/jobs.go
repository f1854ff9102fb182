package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
)

// jobQueries are the statements of the jobs and their execution rows.
type jobQueries struct {
	insertJobs, insertPlainJobs, insertKeyedJobs, insertReady, insertScheduled, insertBlocked string // lean: leanInsertJobs
	finishJob, deleteJobs, recordError, insertFailed                                          string
	hasDueScheduled, takeDueScheduled, deleteFinished                                         string
}

func newJobQueries(p func(string) string) jobQueries {
	return jobQueries{
		// IDs come from an identity column, so they rise in the order the
		// ORDER BY feeds rows in; numbering them by id recovers each input
		// row's place and with it the execution table it belongs in.
		insertJobs: p(`
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::int[], $5::int[], $6::text[],
		$7::int[], $8::bigint[], $9::smallint[], $10::timestamptz[], $11::text[], $13::int[], $14::text[], $15::text[],
		$16::text[], $17::int[], $18::bigint[], $19::text[], $20::text[], $23::smallint[], $24::smallint[])
	WITH ORDINALITY AS t(kind, queue, args, priority, max_attempts, ckey, clim, cdur, conflict, scheduled_at, state, mblocked,
		meta, tags, rkey, rlim, rperiod, line, more, seq, slots, ord)
), inserted AS (
	INSERT INTO {p}jobs (kind, queue, args, priority, max_attempts, concurrency_key, concurrency_limit,
		concurrency_duration_ms, on_conflict, max_blocked, scheduled_at, created_at, metadata, tags,
		rate_key, rate_limit, rate_period_ms, more_keys, sequence, slots)
	SELECT kind, queue, args, priority, max_attempts, NULLIF(ckey, ''), clim, cdur, conflict, mblocked, scheduled_at, $12,
		NULLIF(meta, '')::jsonb, NULLIF(tags, '')::jsonb, NULLIF(rkey, ''), rlim, rperiod, NULLIF(more, ''), seq, slots
	FROM input ORDER BY ord
	RETURNING id
), numbered AS (
	SELECT id, row_number() OVER (ORDER BY id) AS ord FROM inserted
), placed AS (
	SELECT n.id, i.queue, i.priority, coalesce(NULLIF(i.line, ''), i.ckey) AS line, i.ckey, i.scheduled_at, i.state, i.slots
	FROM numbered n JOIN input i ON i.ord = n.ord
), r AS (
	INSERT INTO {p}ready_executions (job_id, queue, priority, created_at, concurrency_key, slots)
	SELECT id, queue, priority, $12, ckey, slots FROM placed WHERE state = 'ready'
), s AS (
	INSERT INTO {p}scheduled_executions (job_id, queue, priority, scheduled_at)
	SELECT id, queue, priority, scheduled_at FROM placed WHERE state = 'scheduled'
), b AS (
	INSERT INTO {p}blocked_executions (job_id, queue, priority, concurrency_key, created_at)
	SELECT id, queue, priority, line, $12 FROM placed WHERE state = 'blocked'
), k AS (
	-- Every key of each multi-key job, by its input row's place ($21).
	INSERT INTO {p}job_keys (job_id, key)
	SELECT n.id, t.key FROM unnest($21::bigint[], $22::text[]) AS t(ord, key) JOIN numbered n ON n.ord = t.ord
)
SELECT id FROM numbered ORDER BY ord`),
		insertPlainJobs: p(leanInsertJobs(false)),
		insertKeyedJobs: p(leanInsertJobs(true)),
		// A ready row takes its job's key and slots (readyJob).
		insertReady: p(`INSERT INTO {p}ready_executions (job_id, queue, priority, created_at, concurrency_key, slots)
SELECT t.id, t.queue, t.priority, t.at, rj.concurrency_key, rj.slots
FROM unnest($1::bigint[], $2::text[], $3::int[], $4::timestamptz[]) AS t(id, queue, priority, at)` + readyJob(`t.id`)),
		insertScheduled: p(`INSERT INTO {p}scheduled_executions (job_id, queue, priority, scheduled_at)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::timestamptz[])`),
		insertBlocked: p(`INSERT INTO {p}blocked_executions (job_id, queue, priority, concurrency_key, created_at)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::timestamptz[])`),
		finishJob: p(`UPDATE {p}jobs SET attempt = attempt + CASE WHEN $3 THEN 0 ELSE 1 END,
	finished_at = $2, discarded = $3 WHERE id = $1`),
		// The hot-path execution rows have no foreign key (migration
		// 12): a job's delete takes any of them with it.
		deleteJobs: p(`WITH gone AS (DELETE FROM {p}jobs WHERE id = ANY($1::bigint[]) RETURNING id)` + deleteHotRows + `
SELECT 1`),
		recordError: p(`UPDATE {p}jobs SET attempt = attempt + 1, last_error = $2 WHERE id = $1`),
		insertFailed: p(`INSERT INTO {p}failed_executions (job_id, queue, error, failed_at)
SELECT id, queue, $2, $3 FROM {p}jobs WHERE id = $1`),
		hasDueScheduled: p(`SELECT EXISTS (SELECT 1 FROM {p}scheduled_executions WHERE scheduled_at <= $1)`),
		takeDueScheduled: p(`
WITH due AS (
	SELECT job_id FROM {p}scheduled_executions WHERE scheduled_at <= $1
	ORDER BY scheduled_at, priority DESC, job_id LIMIT $2
	FOR UPDATE SKIP LOCKED
), taken AS (
	DELETE FROM {p}scheduled_executions s USING due WHERE s.job_id = due.job_id RETURNING s.job_id
)
SELECT ` + jobColumns + `
FROM taken t JOIN {p}jobs j ON j.id = t.job_id
ORDER BY j.priority DESC, j.id`),
		deleteFinished: p(`WITH gone AS (DELETE FROM {p}jobs WHERE id IN (
	SELECT id FROM {p}jobs WHERE finished_at < $1 ORDER BY finished_at LIMIT $2) RETURNING id)` + deleteHotRows + `
SELECT count(*) FROM gone`),
	}
}

// deleteHotRows follows a CTE gone(id) of deleted jobs: it deletes
// their ready, claimed and blocked rows, which have no foreign key.
const deleteHotRows = `, r AS (DELETE FROM {p}ready_executions x USING gone WHERE x.job_id = gone.id)
, c AS (DELETE FROM {p}claimed_executions x USING gone WHERE x.job_id = gone.id)
, b AS (DELETE FROM {p}blocked_executions x USING gone WHERE x.job_id = gone.id)`

// leanInsertJobs is insertJobs for jobs executor.lean passes: no rate,
// metadata, tags, second key or line. $1 is now; $2-$7 each job's kind,
// queue, args, priority, max_attempts and scheduled_at; with keyed, $8-$12
// its key, limit, duration, on_conflict and max_blocked. A job due later
// goes in scheduled; one due now ready if unkeyed and pending if keyed,
// with no execution row (admission writes it). The ids rise in input
// order, as insertJobs' do. Seven or twelve columns rather than nineteen,
// and none of insertJobs' joins back to its input.
func leanInsertJobs(keyed bool) string {
	var cols, sel, arrays, names string
	if keyed {
		cols = ", concurrency_key, concurrency_limit, concurrency_duration_ms, on_conflict, max_blocked, sequence"
		sel = ", NULLIF(ckey, ''), clim, cdur, conflict, mblocked, seq"
		arrays = ", $8::text[], $9::int[], $10::bigint[], $11::smallint[], $12::int[], $13::smallint[]"
		names = ", ckey, clim, cdur, conflict, mblocked, seq"
	}
	return `
WITH inserted AS (
	INSERT INTO {p}jobs (kind, queue, args, priority, max_attempts, scheduled_at, created_at` + cols + `)
	SELECT kind, queue, args, priority, max_attempts, scheduled_at, $1` + sel + `
	FROM unnest($2::text[], $3::text[], $4::jsonb[], $5::int[], $6::int[], $7::timestamptz[]` + arrays + `)
		WITH ORDINALITY AS t(kind, queue, args, priority, max_attempts, scheduled_at` + names + `, ord)
	ORDER BY ord
	RETURNING id, queue, priority, scheduled_at, concurrency_key
), r AS (
	INSERT INTO {p}ready_executions (job_id, queue, priority, created_at)
	SELECT id, queue, priority, $1 FROM inserted WHERE scheduled_at <= $1 AND concurrency_key IS NULL
), s AS (
	INSERT INTO {p}scheduled_executions (job_id, queue, priority, scheduled_at)
	SELECT id, queue, priority, scheduled_at FROM inserted WHERE scheduled_at > $1
)
SELECT id FROM inserted ORDER BY id`
}

func (e *executor) JobInsertMany(ctx context.Context, now time.Time, jobs []*driver.NewJob) error {
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
		sequences, slots           = make([]int16, n), make([]int16, n)
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
		maxBlocked[i], sequences[i] = int32(j.Limit.MaxBlocked), int16(driver.SequenceColumn(j.Limit))
		scheduled[i], slots[i] = j.ScheduledAt, int16(driver.SlotsOf(j.Slots))
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
		more, keyOrds, keyKeys, sequences, slots)
}

// isLean reports whether leanInsertJobs writes all of j: no rate,
// metadata, tags, second key, second slot or line of its own, and the state the
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
	return len(j.More) == 0 && j.Slots <= 1 && j.Rate.Key == "" && j.Metadata == nil && j.Tags == nil && j.Line == "" && j.State == want
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
	conflicts, maxBlocked, sequences := make([]int16, n), make([]int32, n), make([]int16, n)
	for i, j := range jobs {
		keys[i], limits[i], durations[i] = j.Limit.Key, int32(j.Limit.To), j.Limit.Duration.Milliseconds()
		conflicts[i], maxBlocked[i] = int16(j.Limit.OnConflict), int32(j.Limit.MaxBlocked)
		sequences[i] = int16(driver.SequenceColumn(j.Limit))
	}
	return e.setIDs(ctx, jobs, e.q.insertKeyedJobs, append(params, keys, limits, durations, conflicts, maxBlocked, sequences)...)
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

func (e *executor) ExecutionInsertMany(ctx context.Context, state driver.JobState, rows []driver.Execution) error {
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

func (e *executor) JobFinish(ctx context.Context, jobID int64, now time.Time, discarded bool) error {
	if err := e.write(ctx, e.q.finishJob, jobID, now, discarded); err != nil {
		return fmt.Errorf("finish job %d: %w", jobID, err)
	}
	return nil
}

func (e *executor) JobDeleteMany(ctx context.Context, ids []int64) error {
	if err := e.write(ctx, e.q.deleteJobs, ids); err != nil {
		return fmt.Errorf("delete jobs: %w", err)
	}
	return nil
}

func (e *executor) JobFailAttempt(ctx context.Context, jobID int64, msg string) error {
	if err := e.write(ctx, e.q.recordError, jobID, msg); err != nil {
		return fmt.Errorf("record error of job %d: %w", jobID, err)
	}
	return nil
}

func (e *executor) FailedInsert(ctx context.Context, jobID int64, msg string, now time.Time) error {
	if err := e.write(ctx, e.q.insertFailed, jobID, msg, now); err != nil {
		return fmt.Errorf("move job %d to failed: %w", jobID, err)
	}
	return nil
}

func (e *executor) ScheduledDueExists(ctx context.Context, now time.Time) (bool, error) {
	var due bool
	if err := e.db.QueryRow(ctx, e.q.hasDueScheduled, now).Scan(&due); err != nil {
		return false, fmt.Errorf("look for due scheduled jobs: %w", err)
	}
	return due, nil
}

func (e *executor) ScheduledTakeDue(ctx context.Context, now time.Time, max int) ([]*driver.Job, error) {
	out, err := collect(ctx, e.db, func(r pgx.CollectableRow) (*driver.Job, error) {
		j := &driver.Job{}
		return j, scanJob(r, j)
	}, e.q.takeDueScheduled, now, max)
	if err != nil {
		return nil, fmt.Errorf("take due scheduled jobs: %w", err)
	}
	return out, nil
}

func (e *executor) JobDeleteFinished(ctx context.Context, before time.Time, max int) (int, error) {
	var n int
	if err := e.db.QueryRow(ctx, e.q.deleteFinished, before, max).Scan(&n); err != nil {
		return 0, fmt.Errorf("delete finished jobs: %w", err)
	}
	return n, nil
}
