package sqlexec

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
)

// DependencyQueries are the statements of the dependencies between jobs
// (driver.DependencyStore). LockDependents is a locking read where the
// dialect has row locks (FOR UPDATE appended): two finishes of one job
// cannot both take its edges.
type DependencyQueries struct {
	Mark, End, Insert, LockDependents, DeleteDependents            string
	InsertWaiting, CountDown, Pending, GetWaiting, Open, ListEnded string
	SetOutput, GetOutput                                           string
	RecordCancel, LockCancels, DeleteCancels, Rearm, CountOpen     string
}

func dependencyStatements(p func(string) string) DependencyQueries {
	return DependencyQueries{
		Mark: p(`UPDATE {p}jobs SET has_dependents = TRUE WHERE id = ?`),
		End: p(`SELECT j.finished_at IS NOT NULL, j.cancelled OR j.discarded,
	EXISTS (SELECT 1 FROM {p}failed_executions f WHERE f.job_id = j.id)
FROM {p}jobs j WHERE j.id = ?`),
		Insert:           p(`INSERT INTO {p}dependencies (depends_on, job_id, even_if_failed) VALUES (?, ?, ?)`),
		LockDependents:   p(`SELECT job_id, even_if_failed FROM {p}dependencies WHERE depends_on = ? ORDER BY job_id`),
		DeleteDependents: p(`DELETE FROM {p}dependencies WHERE depends_on = ?`),
		InsertWaiting: p(`INSERT INTO {p}waiting_executions (job_id, queue, priority, pending, total, created_at)
VALUES (?, ?, ?, ?, ?, ?)`),
		CountDown:     p(`UPDATE {p}waiting_executions SET pending = pending - ? WHERE job_id = ?`),
		Pending:       p(`SELECT pending FROM {p}waiting_executions WHERE job_id = ?`),
		GetWaiting:    p(`SELECT queue, priority, pending, total, created_at FROM {p}waiting_executions WHERE job_id = ?`),
		Open:          p(`SELECT depends_on FROM {p}dependencies WHERE job_id = ? ORDER BY depends_on`),
		RecordCancel:  p(`INSERT INTO {p}dependency_cancels (depends_on, job_id) VALUES (?, ?)`),
		LockCancels:   p(`SELECT job_id FROM {p}dependency_cancels WHERE depends_on = ? ORDER BY job_id`),
		DeleteCancels: p(`DELETE FROM {p}dependency_cancels WHERE depends_on = ?`),
		Rearm: p(`UPDATE {p}jobs SET finished_at = NULL, cancelled = FALSE, last_error = NULL
WHERE id = ? AND cancelled AND finished_at IS NOT NULL`),
		CountOpen: p(`SELECT count(*) FROM {p}dependencies WHERE job_id = ?`),
		SetOutput: p(`UPDATE {p}jobs SET output = ? WHERE id = ?
AND EXISTS (SELECT 1 FROM {p}claimed_executions c WHERE c.job_id = ? AND c.fence = ?)`),
		GetOutput: p(`SELECT output FROM {p}jobs WHERE id = ?`),
		// The jobs that ended and still have edges: finished, failed, or
		// gone (deleted as they completed, under NoRetention).
		ListEnded: p(`SELECT DISTINCT d.depends_on FROM {p}dependencies d
LEFT JOIN {p}jobs j ON j.id = d.depends_on
WHERE j.id IS NULL OR j.finished_at IS NOT NULL
	OR EXISTS (SELECT 1 FROM {p}failed_executions f WHERE f.job_id = d.depends_on)
ORDER BY d.depends_on LIMIT ?`),
	}
}

func (s Shared) DependencyMark(ctx context.Context, id int64) (driver.DependencyEnd, bool, error) {
	if _, err := s.c.Write(ctx, s.q.Dependencies.Mark, id); err != nil {
		return 0, false, fmt.Errorf("mark job %d as a dependency: %w", id, err)
	}
	return s.dependencyEnd(ctx, id)
}

// dependencyEnd reads how job id ended, as its dependents see it.
func (s Shared) dependencyEnd(ctx context.Context, id int64) (driver.DependencyEnd, bool, error) {
	var finished, dropped, failed bool
	ok, err := found(s.c.QueryRow(ctx, s.q.Dependencies.End, id).Scan(&finished, &dropped, &failed))
	if err != nil || !ok {
		return 0, ok, wrapErr(err, "read how job %d ended", id)
	}
	switch {
	case failed || finished && dropped:
		return driver.DependencyFailed, true, nil
	case finished:
		return driver.DependencyCompleted, true, nil
	}
	return driver.DependencyOpen, true, nil
}

func (s Shared) DependencyInsertMany(ctx context.Context, deps []driver.Dependency) error {
	for _, d := range deps {
		if _, err := s.c.Write(ctx, s.q.Dependencies.Insert, d.DependsOn, d.JobID, d.EvenIfFailed); err != nil {
			return fmt.Errorf("store job %d's dependency on job %d: %w", d.JobID, d.DependsOn, err)
		}
	}
	return nil
}

func (s Shared) DependentsTake(ctx context.Context, id int64) ([]driver.Dependency, error) {
	deps, err := collect(ctx, s.c, func(r Row) (d driver.Dependency, err error) {
		d.DependsOn = id
		err = r.Scan(&d.JobID, &d.EvenIfFailed)
		return d, err
	}, s.q.Dependencies.LockDependents, id)
	if err != nil {
		return nil, fmt.Errorf("read the jobs waiting for job %d: %w", id, err)
	}
	if len(deps) == 0 {
		return nil, nil
	}
	if _, err := s.c.Write(ctx, s.q.Dependencies.DeleteDependents, id); err != nil {
		return nil, fmt.Errorf("take the jobs waiting for job %d: %w", id, err)
	}
	return deps, nil
}

func (s Shared) WaitingInsert(ctx context.Context, w driver.Waiting) error {
	_, err := s.c.Write(ctx, s.q.Dependencies.InsertWaiting, w.JobID, s.c.Text(w.Queue), w.Priority, w.Pending, w.Total, s.c.Time(w.At))
	if err != nil {
		return fmt.Errorf("store job %d as waiting: %w", w.JobID, err)
	}
	return nil
}

func (s Shared) WaitingCountDown(ctx context.Context, id int64, n int) (int, bool, error) {
	changed, err := s.c.Write(ctx, s.q.Dependencies.CountDown, n, id)
	if err != nil || changed == 0 {
		return 0, false, wrapErr(err, "count down job %d's dependencies", id)
	}
	var left int
	if err := s.c.QueryRow(ctx, s.q.Dependencies.Pending, id).Scan(&left); err != nil {
		return 0, false, fmt.Errorf("read job %d's dependencies left: %w", id, err)
	}
	return left, true, nil
}

func (s Shared) WaitingGet(ctx context.Context, id int64) (driver.Waiting, []int64, bool, error) {
	w := driver.Waiting{JobID: id}
	var queue string
	ok, err := found(s.c.QueryRow(ctx, s.q.Dependencies.GetWaiting, id).Scan(&queue, &w.Priority, &w.Pending, &w.Total, At(&w.At)))
	if err != nil || !ok {
		return w, nil, ok, wrapErr(err, "read waiting job %d", id)
	}
	w.Queue = queue
	open, err := collect(ctx, s.c, func(r Row) (dep int64, err error) {
		err = r.Scan(&dep)
		return dep, err
	}, s.q.Dependencies.Open, id)
	if err != nil {
		return w, nil, false, fmt.Errorf("read the jobs job %d waits for: %w", id, err)
	}
	return w, open, true, nil
}

func (s Shared) DependencyListEnded(ctx context.Context, max int) ([]int64, error) {
	ids, err := collect(ctx, s.c, func(r Row) (id int64, err error) {
		err = r.Scan(&id)
		return id, err
	}, s.q.Dependencies.ListEnded, max)
	if err != nil {
		return nil, fmt.Errorf("find ended jobs with dependents: %w", err)
	}
	return ids, nil
}

// wrapErr wraps err with what failed, or is nil when err is.
func wrapErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

func (s Shared) JobSetOutput(ctx context.Context, id, fence int64, output []byte) (bool, error) {
	n, err := s.c.Write(ctx, s.q.Dependencies.SetOutput, string(output), id, id, fence)
	if err != nil {
		return false, fmt.Errorf("store job %d's output: %w", id, err)
	}
	return n == 1, nil
}

func (s Shared) JobGetOutput(ctx context.Context, id int64) ([]byte, bool, error) {
	var out sql.NullString
	ok, err := found(s.c.QueryRow(ctx, s.q.Dependencies.GetOutput, id).Scan(&out))
	if err != nil || !ok || !out.Valid {
		return nil, ok, wrapErr(err, "read job %d's output", id)
	}
	return []byte(out.String), true, nil
}

func (s Shared) JobFindTask(ctx context.Context, workflow, task string) (int64, bool, error) {
	query, args := s.c.JobListing(driver.JobFilter{Metadata: map[string]string{"bq.workflow": workflow, "bq.task": task}, Max: 1})
	jobs, err := collect(ctx, s.c, scanJobInfo, query, args...)
	if err != nil {
		return 0, false, fmt.Errorf("find task %q of workflow %s: %w", task, workflow, err)
	}
	if len(jobs) == 0 {
		return 0, false, nil
	}
	return jobs[0].ID, true, nil
}

func (s Shared) DependencyCancelRecord(ctx context.Context, by, id int64) error {
	if _, err := s.c.Write(ctx, s.q.Dependencies.RecordCancel, by, id); err != nil {
		return fmt.Errorf("record job %d cancelled by job %d's failure: %w", id, by, err)
	}
	return nil
}

func (s Shared) DependencyCancelTake(ctx context.Context, by int64) ([]int64, error) {
	ids, err := collect(ctx, s.c, func(r Row) (id int64, err error) {
		err = r.Scan(&id)
		return id, err
	}, s.q.Dependencies.LockCancels, by)
	if err != nil || len(ids) == 0 {
		return nil, wrapErr(err, "read the jobs job %d's failure cancelled", by)
	}
	if _, err := s.c.Write(ctx, s.q.Dependencies.DeleteCancels, by); err != nil {
		return nil, fmt.Errorf("take the jobs job %d's failure cancelled: %w", by, err)
	}
	return ids, nil
}

func (s Shared) JobRearm(ctx context.Context, id int64) (bool, error) {
	n, err := s.c.Write(ctx, s.q.Dependencies.Rearm, id)
	if err != nil {
		return false, fmt.Errorf("re-arm job %d: %w", id, err)
	}
	return n == 1, nil
}

func (s Shared) DependencyCountOpen(ctx context.Context, id int64) (int, error) {
	var n int
	if err := s.c.QueryRow(ctx, s.q.Dependencies.CountOpen, id).Scan(&n); err != nil {
		return 0, fmt.Errorf("count job %d's open dependencies: %w", id, err)
	}
	return n, nil
}
