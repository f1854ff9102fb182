package memstore

import (
	"context"
	"errors"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (s *Store) ExecutionDelete(_ context.Context, state driver.JobState, id int64) (bool, error) {
	if !driver.Executes(state) && state != driver.StateFailed && state != driver.StateWaiting {
		return false, errors.New("memstore: no execution table for that state")
	}
	r, ok := s.Jobs[id]
	if !ok || r.State != state {
		return false, nil
	}
	r.State = ""
	delete(s.Waits, id)
	return true, nil
}

func (s *Store) JobCancel(_ context.Context, p driver.JobCancelParams) error {
	id, ran, msg := p.JobID, p.Ran, p.Msg
	r, ok := s.Jobs[id]
	if !ok {
		return errors.New("memstore: no such job")
	}
	if ran {
		r.Attempt++
	}
	if msg != "" {
		r.LastError = msg
	}
	r.State = driver.StateCancelled
	return nil
}

func (s *Store) ClaimMarkCancel(_ context.Context, id int64, now time.Time) (time.Time, bool, error) {
	r, ok := s.Jobs[id]
	if !ok || r.State != driver.StateRunning {
		return time.Time{}, false, nil
	}
	if r.CancelAt.IsZero() {
		r.CancelAt = now
	}
	return r.CancelAt, true, nil
}

func (s *Store) ClaimCancelRequested(_ context.Context, id, fence int64) (bool, error) {
	r, ok := s.Jobs[id]
	return ok && r.State == driver.StateRunning && r.Fence == fence && !r.CancelAt.IsZero(), nil
}
