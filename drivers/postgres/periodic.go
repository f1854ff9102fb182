package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
)

// periodicQueries are the periodic schedules' statements (driver.PeriodicStore).
type periodicQueries struct {
	lock, insert, update, prune, due, advance, record, list string
}

const periodicColumns = `name, kind, schedule, next_run_at, last_run_at, last_job_id, last_state, created_at, seen_at`

func newPeriodicQueries(p func(string) string) periodicQueries {
	return periodicQueries{
		lock: p(`SELECT ` + periodicColumns + ` FROM {p}periodic_jobs WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE`),
		insert: p(`INSERT INTO {p}periodic_jobs (name, kind, schedule, next_run_at, created_at, seen_at)
VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (name) DO NOTHING`),
		update: p(`UPDATE {p}periodic_jobs SET kind = $2, schedule = $3, next_run_at = $4, seen_at = $5 WHERE name = $1`),
		prune:  p(`DELETE FROM {p}periodic_jobs WHERE seen_at < $1`),
		due:    p(`SELECT ` + periodicColumns + ` FROM {p}periodic_jobs WHERE next_run_at <= $1 ORDER BY next_run_at, name`),
		// The tick's identity: only the transaction that still finds the
		// tick it read moves it on; one that waited on the row lock sees
		// the moved row, matches nothing and changes no row.
		advance: p(`UPDATE {p}periodic_jobs SET next_run_at = $2 WHERE name = $1 AND next_run_at = $3 AND schedule = $4`),
		record:  p(`UPDATE {p}periodic_jobs SET last_run_at = $2, last_job_id = $3, last_state = $4 WHERE name = $1`),
		list:    p(`SELECT ` + periodicColumns + ` FROM {p}periodic_jobs ORDER BY name`),
	}
}

func (e *executor) periodic(ctx context.Context, query string, args ...any) ([]driver.Periodic, error) {
	return collect(ctx, e.db, func(r pgx.CollectableRow) (p driver.Periodic, err error) {
		var jobID *int64
		var state *string
		err = r.Scan(&p.Name, &p.Kind, &p.Schedule, &p.NextRunAt, &p.LastRunAt, &jobID, &state, &p.CreatedAt, &p.SeenAt)
		if jobID != nil {
			p.LastJobID = *jobID
		}
		if state != nil {
			p.LastState = driver.JobState(*state)
		}
		return p, err
	}, query, args...)
}

func (e *executor) LockPeriodic(ctx context.Context, names []string) ([]driver.Periodic, error) {
	out, err := e.periodic(ctx, e.q.periodic.lock, names)
	if err != nil {
		return nil, fmt.Errorf("lock periodic jobs: %w", err)
	}
	return out, nil
}

func (e *executor) InsertPeriodic(ctx context.Context, p driver.Periodic) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.periodic.insert, p.Name, p.Kind, p.Schedule, p.NextRunAt, p.SeenAt)
	if err != nil {
		return false, fmt.Errorf("insert periodic job %q: %w", p.Name, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) UpdatePeriodic(ctx context.Context, p driver.Periodic) error {
	if _, err := e.db.Exec(ctx, e.q.periodic.update, p.Name, p.Kind, p.Schedule, p.NextRunAt, p.SeenAt); err != nil {
		return fmt.Errorf("update periodic job %q: %w", p.Name, err)
	}
	return nil
}

func (e *executor) PrunePeriodic(ctx context.Context, before time.Time) (int, error) {
	tag, err := e.db.Exec(ctx, e.q.periodic.prune, before)
	if err != nil {
		return 0, fmt.Errorf("prune periodic jobs: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func (e *executor) DuePeriodic(ctx context.Context, now time.Time) ([]driver.Periodic, error) {
	out, err := e.periodic(ctx, e.q.periodic.due, now)
	if err != nil {
		return nil, fmt.Errorf("read due periodic jobs: %w", err)
	}
	return out, nil
}

func (e *executor) AdvancePeriodic(ctx context.Context, p driver.AdvanceParams) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.periodic.advance, p.Name, p.Next, p.Was, p.Schedule)
	if err != nil {
		return false, fmt.Errorf("advance periodic job %q: %w", p.Name, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) RecordPeriodicRun(ctx context.Context, name string, at time.Time, jobID int64, state driver.JobState) error {
	var id *int64
	if jobID != 0 {
		id = &jobID
	}
	if _, err := e.db.Exec(ctx, e.q.periodic.record, name, at, id, string(state)); err != nil {
		return fmt.Errorf("record the run of periodic job %q: %w", name, err)
	}
	return nil
}

func (e *executor) ListPeriodic(ctx context.Context) ([]driver.Periodic, error) {
	out, err := e.periodic(ctx, e.q.periodic.list)
	if err != nil {
		return nil, fmt.Errorf("list periodic jobs: %w", err)
	}
	return out, nil
}
