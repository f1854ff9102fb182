package memstore

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/bqueue/bq/internal/driver"
)

func (s *Store) DependencyMark(_ context.Context, id int64) (driver.DependencyEnd, bool, error) {
	r, ok := s.Jobs[id]
	if !ok {
		return 0, false, nil
	}
	r.HasDependents = true
	switch r.State {
	case driver.StateCompleted:
		return driver.DependencyCompleted, true, nil
	case driver.StateFailed, driver.StateCancelled, driver.StateDiscarded:
		return driver.DependencyFailed, true, nil
	}
	return driver.DependencyOpen, true, nil
}

func (s *Store) DependencyInsertMany(_ context.Context, deps []driver.Dependency) error {
	s.Deps = append(s.Deps, deps...)
	return nil
}

func (s *Store) DependentsTake(_ context.Context, id int64) ([]driver.Dependency, error) {
	var took, left []driver.Dependency
	for _, d := range s.Deps {
		if d.DependsOn == id {
			took = append(took, d)
		} else {
			left = append(left, d)
		}
	}
	s.Deps = left
	slices.SortFunc(took, func(a, b driver.Dependency) int { return cmp.Compare(a.JobID, b.JobID) })
	return took, nil
}

func (s *Store) WaitingInsert(_ context.Context, w driver.Waiting) error {
	s.Waits[w.JobID] = &w
	if r, ok := s.Jobs[w.JobID]; ok {
		r.State = driver.StateWaiting
	}
	return nil
}

func (s *Store) WaitingCountDown(_ context.Context, id int64, n int) (int, bool, error) {
	w, ok := s.Waits[id]
	if !ok {
		return 0, false, nil
	}
	w.Pending -= n
	return w.Pending, true, nil
}

func (s *Store) WaitingGet(_ context.Context, id int64) (driver.Waiting, []int64, bool, error) {
	w, ok := s.Waits[id]
	if !ok {
		return driver.Waiting{}, nil, false, nil
	}
	var open []int64
	for _, d := range s.Deps {
		if d.JobID == id {
			open = append(open, d.DependsOn)
		}
	}
	slices.Sort(open)
	return *w, open, true, nil
}

func (s *Store) DependencyListEnded(_ context.Context, max int) ([]int64, error) {
	var out []int64
	for _, d := range s.Deps {
		r, ok := s.Jobs[d.DependsOn]
		if (!ok || r.State == driver.StateCompleted || r.State == driver.StateFailed || r.State == driver.StateCancelled ||
			r.State == driver.StateDiscarded) && !slices.Contains(out, d.DependsOn) {
			out = append(out, d.DependsOn)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), max)], nil
}

func (s *Store) JobSetOutput(_ context.Context, id, fence int64, output []byte) (bool, error) {
	r, ok := s.Jobs[id]
	if !ok || r.State != driver.StateRunning || r.Fence != fence {
		return false, nil
	}
	if s.Outputs == nil {
		s.Outputs = map[int64][]byte{}
	}
	s.Outputs[id] = slices.Clone(output)
	return true, nil
}

func (s *Store) JobGetOutput(_ context.Context, id int64) ([]byte, bool, error) {
	if _, ok := s.Jobs[id]; !ok {
		return nil, false, nil
	}
	return s.Outputs[id], true, nil
}

func (s *Store) JobFindTask(_ context.Context, workflow, task string) (int64, bool, error) {
	return 0, false, errors.New("memstore: no job metadata search")
}

func (s *Store) DependencyCancelRecord(_ context.Context, by, id int64) error {
	if s.Cancels == nil {
		s.Cancels = map[int64][]int64{}
	}
	s.Cancels[by] = append(s.Cancels[by], id)
	return nil
}

func (s *Store) DependencyCancelTake(_ context.Context, by int64) ([]int64, error) {
	ids := slices.Sorted(slices.Values(s.Cancels[by]))
	delete(s.Cancels, by)
	return ids, nil
}

func (s *Store) JobRearm(_ context.Context, id int64) (bool, error) {
	r, ok := s.Jobs[id]
	if !ok || r.State != driver.StateCancelled {
		return false, nil
	}
	r.State, r.LastError = "", ""
	return true, nil
}

func (s *Store) DependencyCountOpen(_ context.Context, id int64) (int, error) {
	n := 0
	for _, d := range s.Deps {
		if d.JobID == id {
			n++
		}
	}
	return n, nil
}
