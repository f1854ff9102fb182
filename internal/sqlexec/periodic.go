package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqltext"
)

// PeriodicQueries are the periodic schedules' statements (driver.PeriodicStore).
type PeriodicQueries struct {
	// Lock reads the rows of a list of names (Conn.Names), locking them
	// where the dialect has row locks; Insert affects no row when the
	// name exists.
	Lock, Insert                              string
	Update, Prune, Due, Advance, Record, List string
}

// periodicQueries spells the statements every dialect writes alike; a
// dialect with row locks adds FOR UPDATE to Lock, and a dialect may
// spell Lock's list and Insert its own way.
func periodicQueries(p func(string) string) PeriodicQueries {
	return PeriodicQueries{
		Lock: p(`SELECT ` + sqltext.PeriodicColumns + ` FROM {p}periodic_jobs WHERE name IN ` + ListMarker + ` ORDER BY name`),
		Insert: p(`INSERT INTO {p}periodic_jobs (name, kind, schedule, next_run_at, created_at, seen_at)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`),
		Update: p(`UPDATE {p}periodic_jobs SET kind = ?, schedule = ?, next_run_at = ?, seen_at = ? WHERE name = ?`),
		Prune:  p(`DELETE FROM {p}periodic_jobs WHERE seen_at < ?`),
		Due:    p(`SELECT ` + sqltext.PeriodicColumns + ` FROM {p}periodic_jobs WHERE next_run_at <= ? ORDER BY next_run_at, name`),
		// The tick's identity: only the transaction that still finds the
		// tick it read moves it on; one that waited on the row lock sees
		// the moved row, matches nothing and changes no row.
		Advance: p(`UPDATE {p}periodic_jobs SET next_run_at = ? WHERE name = ? AND next_run_at = ? AND schedule = ?`),
		Record:  p(`UPDATE {p}periodic_jobs SET last_run_at = ?, last_job_id = ?, last_state = ? WHERE name = ?`),
		List:    p(`SELECT ` + sqltext.PeriodicColumns + ` FROM {p}periodic_jobs ORDER BY name`),
	}
}

func (s Shared) periodic(ctx context.Context, query string, args ...any) ([]driver.Periodic, error) {
	return collect(ctx, s.c, func(r Row) (p driver.Periodic, err error) {
		var jobID sql.NullInt64
		var state sql.NullString
		err = r.Scan(&p.Name, &p.Kind, &p.Schedule, At(&p.NextRunAt), OptAt(&p.LastRunAt), &jobID, &state,
			At(&p.CreatedAt), At(&p.SeenAt))
		p.LastJobID, p.LastState = jobID.Int64, driver.JobState(state.String)
		return p, err
	}, query, args...)
}

func (s Shared) PeriodicLockMany(ctx context.Context, names []string) ([]driver.Periodic, error) {
	if len(names) == 0 {
		return nil, nil
	}
	query, args := s.c.Names(s.q.Periodic.Lock, names)
	out, err := s.periodic(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("lock periodic jobs: %w", err)
	}
	return out, nil
}

func (s Shared) PeriodicInsert(ctx context.Context, p driver.Periodic) (bool, error) {
	n, err := s.c.Write(ctx, s.q.Periodic.Insert, s.c.Text(p.Name), p.Kind, p.Schedule, s.c.Time(p.NextRunAt),
		s.c.Time(p.SeenAt), s.c.Time(p.SeenAt))
	if err != nil {
		return false, fmt.Errorf("insert periodic job %q: %w", p.Name, err)
	}
	return n == 1, nil
}

func (s Shared) PeriodicUpdate(ctx context.Context, p driver.Periodic) error {
	if _, err := s.c.Write(ctx, s.q.Periodic.Update, p.Kind, p.Schedule, s.c.Time(p.NextRunAt), s.c.Time(p.SeenAt),
		s.c.Text(p.Name)); err != nil {
		return fmt.Errorf("update periodic job %q: %w", p.Name, err)
	}
	return nil
}

func (s Shared) PeriodicPrune(ctx context.Context, before time.Time) (int, error) {
	n, err := s.c.Write(ctx, s.q.Periodic.Prune, s.c.Time(before))
	if err != nil {
		return 0, fmt.Errorf("prune periodic jobs: %w", err)
	}
	return int(n), nil
}

func (s Shared) PeriodicListDue(ctx context.Context, now time.Time) ([]driver.Periodic, error) {
	out, err := s.periodic(ctx, s.q.Periodic.Due, s.c.Time(now))
	if err != nil {
		return nil, fmt.Errorf("read due periodic jobs: %w", err)
	}
	return out, nil
}

func (s Shared) PeriodicAdvance(ctx context.Context, p driver.AdvanceParams) (bool, error) {
	n, err := s.c.Write(ctx, s.q.Periodic.Advance, s.c.Time(p.Next), s.c.Text(p.Name), s.c.Time(p.Was), p.Schedule)
	if err != nil {
		return false, fmt.Errorf("advance periodic job %q: %w", p.Name, err)
	}
	return n == 1, nil
}

func (s Shared) PeriodicSetLastRun(ctx context.Context, p driver.PeriodicRunParams) error {
	name, at, jobID, state := p.Name, p.At, p.JobID, p.State
	var id any // NULL: no job
	if jobID != 0 {
		id = jobID
	}
	if _, err := s.c.Write(ctx, s.q.Periodic.Record, s.c.Time(at), id, string(state), s.c.Text(name)); err != nil {
		return fmt.Errorf("record the run of periodic job %q: %w", name, err)
	}
	return nil
}

func (s Shared) PeriodicList(ctx context.Context) ([]driver.Periodic, error) {
	out, err := s.periodic(ctx, s.q.Periodic.List)
	if err != nil {
		return nil, fmt.Errorf("list periodic jobs: %w", err)
	}
	return out, nil
}
