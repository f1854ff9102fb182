package memstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (s *Store) ReadyExists(_ context.Context, queue string) (bool, error) {
	return len(s.sorted(func(r *Row) bool { return r.State == driver.StateReady && r.Queue == queue })) > 0, nil
}

func (s *Store) QueueGateGet(_ context.Context, queue string) (driver.Gate, error) {
	_, paused := s.Paused[queue]
	pol := s.Policies[queue]
	return driver.Gate{MaxActive: pol.MaxActive, Paused: paused, Fair: pol.FairShare, Weight: pol.KeyWeight}, nil
}

func (s *Store) RunningSlots(_ context.Context, queue string) (int, error) {
	n := 0
	for _, r := range s.sorted(func(r *Row) bool { return r.State == driver.StateRunning && r.Queue == queue }) {
		n += driver.SlotsOf(r.Slots)
	}
	return n, nil
}

// ReadyClaim takes up to p.Max ready jobs of p.Queue (of p.Among, if
// given).
func (s *Store) ReadyClaim(_ context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	var out []*driver.Claim
	for _, r := range s.sorted(func(r *Row) bool {
		return r.State == driver.StateReady && r.Queue == p.Queue && (p.Among == nil || slices.Contains(p.Among, r.ID))
	}) {
		if len(out) == p.Max {
			break
		}
		s.nextFence++
		r.State, r.Fence = driver.StateRunning, s.nextFence
		out = append(out, &driver.Claim{Job: r.Job, Fence: r.Fence, ClaimedAt: p.Now})
	}
	return out, nil
}

// ReadyByKey groups the queue's first p.Rows ready jobs (all with
// p.PerKey, counting at most p.Max a key) by their first key.
func (s *Store) ReadyByKey(_ context.Context, p driver.KeyViewParams) (driver.KeyView, error) {
	var view driver.KeyView
	for _, w := range s.Weights {
		view.MaxWeight = max(view.MaxWeight, w)
	}
	at := map[string]int{}
	ready := s.sorted(func(r *Row) bool { return r.State == driver.StateReady && r.Queue == p.Queue })
	view.Whole = p.PerKey || p.Rows <= 0 || len(ready) < p.Rows
	if !view.Whole {
		ready = ready[:p.Rows]
	}
	for n, r := range ready {
		i, ok := at[r.Limit.Key]
		if !ok {
			i = len(view.Keys)
			at[r.Limit.Key] = i
			view.Keys = append(view.Keys, driver.KeyReady{Key: r.Limit.Key, Weight: s.Weights[r.Limit.Key], Head: n})
		}
		if !p.PerKey || view.Keys[i].Ready < p.Max {
			view.Keys[i].Ready++
		}
		if len(view.Keys[i].JobIDs) < p.Max {
			view.Keys[i].JobIDs = append(view.Keys[i].JobIDs, r.ID)
			view.Keys[i].Slots = append(view.Keys[i].Slots, driver.SlotsOf(r.Slots))
		}
	}
	for _, r := range s.sorted(func(r *Row) bool { return r.State == driver.StateRunning && r.Queue == p.Queue }) {
		i, ok := at[r.Limit.Key]
		if !ok {
			i = len(view.Keys)
			at[r.Limit.Key] = i
			view.Keys = append(view.Keys, driver.KeyReady{Key: r.Limit.Key, Head: -1})
		}
		view.Keys[i].Running += driver.SlotsOf(r.Slots)
	}
	slices.SortFunc(view.Keys, func(a, b driver.KeyReady) int { return cmp.Compare(a.Key, b.Key) })
	return view, nil
}

func (s *Store) ReadyClaimHandOff(_ context.Context, p driver.HandOffParams) ([]*driver.Claim, error) {
	if _, paused := s.Paused[p.Queue]; paused || s.Policies[p.Queue].MaxActive > 0 || s.Policies[p.Queue].FairShare {
		return nil, nil
	}
	ids := map[int64]bool{}
	for _, id := range p.IDs {
		ids[id] = true
	}
	var out []*driver.Claim
	for _, r := range s.sorted(func(r *Row) bool {
		return r.State == driver.StateReady && r.Queue == p.Queue && ids[r.ID] && r.Rate.Key == ""
	}) {
		if len(out) == p.Max {
			break
		}
		s.nextFence++
		r.State, r.Fence = driver.StateRunning, s.nextFence
		out = append(out, &driver.Claim{Job: r.Job, Fence: r.Fence, ClaimedAt: p.Now})
	}
	return out, nil
}

func (s *Store) ClaimDelete(_ context.Context, id, fence int64) (bool, error) {
	r, ok := s.Jobs[id]
	if !ok || r.State != driver.StateRunning || r.Fence != fence {
		return false, nil
	}
	r.State, r.Fence, r.CancelAt = "", 0, time.Time{}
	return true, nil
}

func (s *Store) ClaimCompleteMany(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Ended, error) {
	var out []driver.Ended
	for _, c := range claims {
		if ok, _ := s.ClaimDelete(ctx, c.ID, c.Fence); !ok {
			continue
		}
		out = append(out, driver.Ended{Fenced: driver.Fenced{JobID: c.ID, Fence: c.Fence}, HasDependents: s.Jobs[c.ID].HasDependents})
		if keep {
			_ = s.JobFinish(ctx, c.ID, now, false)
		} else {
			delete(s.Jobs, c.ID)
		}
	}
	return out, nil
}
