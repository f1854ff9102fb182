package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqltext"
)

func (e *Executor) ListJobs(ctx context.Context, f driver.JobFilter) ([]*driver.JobInfo, error) {
	s := e.d.ListSpelling()
	s.Time = func(t time.Time) any { return Micros(t) }
	s.Text = e.d.Text
	query, args := sqltext.ListJobs(f, s)
	out, err := Collect(ctx, e.db, func(rows *sql.Rows) (*driver.JobInfo, error) {
		return scanJobInfo(rows.Scan)
	}, e.q.Spell(query), args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}
