package sqlexec

import (
	"context"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
)

func (s Shared) JobGet(ctx context.Context, id int64) (*driver.JobInfo, bool, error) {
	info, err := scanJobInfo(s.c.QueryRow(ctx, s.q.GetJob, id))
	ok, err := found(err)
	if err != nil {
		return nil, false, fmt.Errorf("get job %d: %w", id, err)
	}
	if !ok {
		return nil, false, nil
	}
	return info, true, nil
}

func (s Shared) JobList(ctx context.Context, f driver.JobFilter) ([]*driver.JobInfo, error) {
	query, args := s.c.JobListing(f)
	out, err := collect(ctx, s.c, scanJobInfo, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

// scanJobInfo reads sqltext.JobInfoColumns.
func scanJobInfo(r Row) (*driver.JobInfo, error) {
	info := &driver.JobInfo{}
	var state string
	if err := ScanJob(r.Scan, &info.Job, &info.LastError, OptAt(&info.FinishedAt), &state); err != nil {
		return nil, err
	}
	info.State = driver.JobState(state)
	return info, nil
}
