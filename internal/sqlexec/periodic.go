package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// PeriodicQueries are the periodic schedules' statements (driver.PeriodicStore).
type PeriodicQueries struct {
	// Lock reads the rows of a list of names, locking them where the
	// dialect has row locks; Insert affects no row when the name exists.
	Lock, Insert                              string
	Update, Prune, Due, Advance, Record, List string
}

const periodicColumns = `name, kind, schedule, next_run_at, last_run_at, last_job_id, last_state, created_at, seen_at`

// periodicQueries spells the statements both dialects write alike; a
// dialect with row locks adds FOR UPDATE to Lock and spells Insert its way.
func periodicQueries(p func(string) string) PeriodicQueries {
	return PeriodicQueries{
		Lock: p(`SELECT ` + periodicColumns + ` FROM {p}periodic_jobs WHERE name IN ` + ListMarker + ` ORDER BY name`),
		Insert: p(`INSERT INTO {p}periodic_jobs (name, kind, schedule, next_run_at, created_at, seen_at)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`),
		Update: p(`UPDATE {p}periodic_jobs SET kind = ?, schedule = ?, next_run_at = ?, seen_at = ? WHERE name = ?`),
		Prune:  p(`DELETE FROM {p}periodic_jobs WHERE seen_at < ?`),
		Due:    p(`SELECT ` + periodicColumns + ` FROM {p}periodic_jobs WHERE next_run_at <= ? ORDER BY next_run_at, name`),
		// The tick's identity: only the transaction that still finds the
		// tick it read moves it on; every other one changes no row.
		Advance: p(`UPDATE {p}periodic_jobs SET next_run_at = ? WHERE name = ? AND next_run_at = ? AND schedule = ?`),
		Record:  p(`UPDATE {p}periodic_jobs SET last_run_at = ?, last_job_id = ?, last_state = ? WHERE name = ?`),
		List:    p(`SELECT ` + periodicColumns + ` FROM {p}periodic_jobs ORDER BY name`),
	}
}

func (e *Executor) periodic(ctx context.Context, query string, args ...any) ([]driver.Periodic, error) {
	return Collect(ctx, e.db, func(rows *sql.Rows) (p driver.Periodic, err error) {
		var next, created, seen int64
		var last, jobID sql.NullInt64
		var state sql.NullString
		err = rows.Scan(&p.Name, &p.Kind, &p.Schedule, &next, &last, &jobID, &state, &created, &seen)
		p.NextRunAt, p.CreatedAt, p.SeenAt = FromMicros(next), FromMicros(created), FromMicros(seen)
		if last.Valid {
			t := FromMicros(last.Int64)
			p.LastRunAt = &t
		}
		p.LastJobID, p.LastState = jobID.Int64, driver.JobState(state.String)
		return p, err
	}, query, args...)
}

func (e *Executor) LockPeriodic(ctx context.Context, names []string) ([]driver.Periodic, error) {
	if len(names) == 0 {
		return nil, nil
	}
	items := make([]any, len(names))
	for i, n := range names {
		items[i] = e.d.Text(n)
	}
	query, args := in(e, e.q.Periodic.Lock, items)
	out, err := e.periodic(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("lock periodic jobs: %w", err)
	}
	return out, nil
}

func (e *Executor) InsertPeriodic(ctx context.Context, p driver.Periodic) (bool, error) {
	n, err := e.exec(ctx, e.q.Periodic.Insert, e.d.Text(p.Name), p.Kind, p.Schedule, Micros(p.NextRunAt),
		Micros(p.SeenAt), Micros(p.SeenAt))
	if err != nil {
		return false, fmt.Errorf("insert periodic job %q: %w", p.Name, err)
	}
	return n == 1, nil
}

func (e *Executor) UpdatePeriodic(ctx context.Context, p driver.Periodic) error {
	if _, err := e.exec(ctx, e.q.Periodic.Update, p.Kind, p.Schedule, Micros(p.NextRunAt), Micros(p.SeenAt),
		e.d.Text(p.Name)); err != nil {
		return fmt.Errorf("update periodic job %q: %w", p.Name, err)
	}
	return nil
}

func (e *Executor) PrunePeriodic(ctx context.Context, before time.Time) (int, error) {
	n, err := e.exec(ctx, e.q.Periodic.Prune, Micros(before))
	if err != nil {
		return 0, fmt.Errorf("prune periodic jobs: %w", err)
	}
	return int(n), nil
}

func (e *Executor) DuePeriodic(ctx context.Context, now time.Time) ([]driver.Periodic, error) {
	out, err := e.periodic(ctx, e.q.Periodic.Due, Micros(now))
	if err != nil {
		return nil, fmt.Errorf("read due periodic jobs: %w", err)
	}
	return out, nil
}

func (e *Executor) AdvancePeriodic(ctx context.Context, p driver.AdvanceParams) (bool, error) {
	n, err := e.exec(ctx, e.q.Periodic.Advance, Micros(p.Next), e.d.Text(p.Name), Micros(p.Was), p.Schedule)
	if err != nil {
		return false, fmt.Errorf("advance periodic job %q: %w", p.Name, err)
	}
	return n == 1, nil
}

func (e *Executor) RecordPeriodicRun(ctx context.Context, name string, at time.Time, jobID int64, state driver.JobState) error {
	id := sql.NullInt64{Int64: jobID, Valid: jobID != 0}
	if _, err := e.exec(ctx, e.q.Periodic.Record, Micros(at), id, string(state), e.d.Text(name)); err != nil {
		return fmt.Errorf("record the run of periodic job %q: %w", name, err)
	}
	return nil
}

func (e *Executor) ListPeriodic(ctx context.Context) ([]driver.Periodic, error) {
	out, err := e.periodic(ctx, e.q.Periodic.List)
	if err != nil {
		return nil, fmt.Errorf("list periodic jobs: %w", err)
	}
	return out, nil
}
