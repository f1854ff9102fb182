package sqlexec

import (
	"context"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
)

// ScheduledDebounce moves a waiting scheduled job's due time, and its
// args unless nil, as a debounced enqueue joins it: its scheduled row
// first, only while it is not due (a dispatcher taking it due holds or
// has deleted the row, and this finds nothing), then its job row. Two
// statements of the enqueue's transaction.
func (s Shared) ScheduledDebounce(ctx context.Context, p driver.DebounceParams) (bool, error) {
	n, err := s.c.Write(ctx, s.q.DebounceScheduled, s.c.Time(p.At), p.JobID, s.c.Time(p.Now))
	if err != nil || n == 0 {
		return false, debounceErr(p.JobID, err)
	}
	var args any
	if p.Args != nil {
		args = s.c.Text(string(p.Args))
	}
	if _, err := s.c.Write(ctx, s.q.DebounceJob, s.c.Time(p.At), args, p.JobID); err != nil {
		return false, debounceErr(p.JobID, err)
	}
	return true, nil
}

func debounceErr(id int64, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("move debounced job %d: %w", id, err)
}
