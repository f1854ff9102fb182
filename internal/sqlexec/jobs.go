package sqlexec

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// nullKey is the concurrency_key column's value: NULL for an unkeyed job.
func (e *Executor) nullKey(key string) any {
	if key == "" {
		return nil
	}
	return e.d.Text(key)
}

// nullJSON is a metadata or tags column's value: NULL when the job has none.
func nullJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func (e *Executor) JobInsertMany(ctx context.Context, now time.Time, jobs []*driver.NewJob) error {
	if len(jobs) == 0 {
		return nil
	}
	if err := driver.CheckNewJobs(jobs); err != nil {
		return err
	}
	for _, j := range jobs {
		if err := e.d.CheckKey(j.Limit.Key); err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
		if err := e.d.CheckKey(j.Rate.Key); err != nil {
			return fmt.Errorf("insert job: rate %w", err)
		}
		for _, l := range j.More {
			if err := e.d.CheckKey(l.Key); err != nil {
				return fmt.Errorf("insert job: %w", err)
			}
		}
	}
	const width = 20
	values := make([]any, 0, width*len(jobs))
	for _, j := range jobs {
		more, err := driver.EncodeMore(j.More)
		if err != nil {
			return fmt.Errorf("insert job: %w", err)
		}
		values = append(values, j.Kind, e.d.Text(j.Queue), string(j.Args), j.Priority, j.MaxAttempts,
			e.nullKey(j.Limit.Key), j.Limit.To, j.Limit.Duration.Milliseconds(), int(j.Limit.OnConflict),
			j.Limit.MaxBlocked, Micros(j.ScheduledAt), Micros(now), nullJSON(j.Metadata), nullJSON(j.Tags),
			e.nullKey(j.Rate.Key), j.Rate.Limit, j.Rate.Period.Milliseconds(), nullJSON(more), driver.SequenceColumn(j.Limit),
			driver.SlotsOf(j.Slots))
	}
	return e.Atomic(ctx, func(x *Executor) error {
		ids, err := x.insertRows(ctx, x.q.InsertJobs, width, values, true)
		if err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
		// Every key of a multi-key job gets its job_keys row, all the
		// batch's in multi-row INSERTs.
		keyWidth := 1 + len(x.d.KeyArgs(""))
		var keyRows []any
		for i, j := range jobs {
			if len(j.More) == 0 {
				continue
			}
			for _, l := range j.Keys() {
				keyRows = append(append(keyRows, ids[i]), x.d.KeyArgs(l.Key)...)
			}
		}
		if len(keyRows) > 0 {
			if _, err := x.insertRows(ctx, x.q.InsertJobKeys, keyWidth, keyRows, false); err != nil {
				return fmt.Errorf("insert the keys of multi-key jobs: %w", err)
			}
		}
		byState := map[driver.JobState][]driver.Execution{}
		for i, j := range jobs {
			j.ID = ids[i]
			at := now
			if j.State == driver.StateScheduled {
				at = j.ScheduledAt
			}
			byState[j.State] = append(byState[j.State], driver.Execution{
				JobID: j.ID, Queue: j.Queue, Priority: j.Priority, Key: j.BlockedLine(), At: at})
		}
		for _, state := range []driver.JobState{driver.StateReady, driver.StateScheduled, driver.StateBlocked} {
			if err := x.insertExecutions(ctx, state, byState[state]); err != nil {
				return err
			}
		}
		return nil
	})
}

// ExecRows runs query with the rows of values (width values each) where
// its RowsMarker stands, or after its VALUES, in the sizes the dialect's
// Batch gives, so a handful of texts serve every count and each stays
// prepared.
func (e *Executor) ExecRows(ctx context.Context, query string, width int, values []any) error {
	_, err := e.insertRows(ctx, query, width, values, false)
	return err
}

// insertRows inserts the rows of values (width values each) with
// multi-row INSERTs of the sizes the dialect's Batch gives: head is the
// statement up to VALUES, or with a RowsMarker where its rows go. With
// ids it returns the new rows' ids in input order.
func (e *Executor) insertRows(ctx context.Context, head string, width int, values []any, ids bool) ([]int64, error) {
	n := len(values) / width
	var out []int64
	if ids {
		out = make([]int64, 0, n)
	}
	for done := 0; done < n; {
		size := e.d.Batch(n-done, ids)
		query := WithRows(head, size, width)
		args := values[done*width : (done+size)*width]
		done += size
		if !ids {
			if _, err := e.db.ExecContext(ctx, query, args...); err != nil {
				return nil, err
			}
			continue
		}
		chunk, err := e.d.InsertIDs(ctx, e.db, query, args)
		if err != nil {
			return nil, err
		}
		if len(chunk) != size {
			return nil, fmt.Errorf("%d ids returned for %d rows", len(chunk), size)
		}
		out = append(out, chunk...)
	}
	return out, nil
}

func (e *Executor) ExecutionInsertMany(ctx context.Context, state driver.JobState, rows []driver.Execution) error {
	if len(rows) == 0 {
		return nil
	}
	return e.Atomic(ctx, func(x *Executor) error { return x.insertExecutions(ctx, state, rows) })
}

// insertExecutions puts rows into state's table, each row's At being its
// created_at (ready, blocked) or scheduled_at (scheduled).
func (e *Executor) insertExecutions(ctx context.Context, state driver.JobState, rows []driver.Execution) error {
	if len(rows) == 0 {
		return nil
	}
	head, width := "", 4
	switch state {
	case driver.StateReady:
		head = e.q.InsertReady
	case driver.StateScheduled:
		head = e.q.InsertScheduled
	case driver.StateBlocked:
		head, width = e.q.InsertBlocked, 5
	default:
		return fmt.Errorf("insert executions: no execution table for state %q", state)
	}
	values := make([]any, 0, width*len(rows))
	for _, r := range rows {
		values = append(values, r.JobID, e.d.Text(r.Queue), r.Priority)
		if state == driver.StateBlocked {
			if err := e.d.CheckKey(r.Key); err != nil {
				return fmt.Errorf("insert execution of job %d: %w", r.JobID, err)
			}
			values = append(values, e.d.Text(r.Key))
		}
		values = append(values, Micros(r.At))
	}
	if _, err := e.insertRows(ctx, head, width, values, false); err != nil {
		return fmt.Errorf("insert executions: %w", err)
	}
	return nil
}

func (e *Executor) JobFinish(ctx context.Context, jobID int64, now time.Time, discarded bool) error {
	attempt := 1
	if discarded {
		attempt = 0
	}
	if _, err := e.exec(ctx, e.q.FinishJob, attempt, Micros(now), discarded, jobID); err != nil {
		return fmt.Errorf("finish job %d: %w", jobID, err)
	}
	return nil
}

func (e *Executor) JobDeleteMany(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	err := e.Atomic(ctx, func(x *Executor) error {
		_, err := ExecIn(ctx, x, x.q.DeleteJobs, ids)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete jobs: %w", err)
	}
	return nil
}

func (e *Executor) JobFailAttempt(ctx context.Context, jobID int64, msg string) error {
	if _, err := e.exec(ctx, e.q.RecordError, msg, jobID); err != nil {
		return fmt.Errorf("record error of job %d: %w", jobID, err)
	}
	return nil
}

func (e *Executor) FailedInsert(ctx context.Context, jobID int64, msg string, now time.Time) error {
	if _, err := e.exec(ctx, e.q.InsertFailed, msg, Micros(now), jobID); err != nil {
		return fmt.Errorf("move job %d to failed: %w", jobID, err)
	}
	return nil
}

func (e *Executor) ScheduledDueExists(ctx context.Context, now time.Time) (bool, error) {
	var due bool
	if err := e.db.QueryRowContext(ctx, e.q.HasDueScheduled, Micros(now)).Scan(&due); err != nil {
		return false, fmt.Errorf("look for due scheduled jobs: %w", err)
	}
	return due, nil
}

func (e *Executor) ScheduledTakeDue(ctx context.Context, now time.Time, max int) ([]*driver.Job, error) {
	var out []*driver.Job
	err := e.Atomic(ctx, func(x *Executor) error {
		out = nil
		due, err := Column[int64](ctx, x.db, x.q.PickDueScheduled, Micros(now), max)
		if err != nil || len(due) == 0 {
			return err
		}
		if _, err := ExecIn(ctx, x, x.q.DeleteScheduled, due); err != nil {
			return err
		}
		out, err = x.jobsIn(ctx, x.q.SelectJobs, due)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("take due scheduled jobs: %w", err)
	}
	return out, nil
}

func (e *Executor) JobDeleteFinished(ctx context.Context, before time.Time, max int) (int, error) {
	n, err := e.exec(ctx, e.q.DeleteFinished, Micros(before), max)
	if err != nil {
		return 0, fmt.Errorf("delete finished jobs: %w", err)
	}
	return int(n), nil
}
