package memstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Slot is one slot of a rate key's ring: the instant of a start, or
// driver.Reserved with the job it is reserved for.
type Slot struct {
	Slot int
	At   time.Time
	Job  int64
}

var _ driver.RateStore = (*Store)(nil)

func (s *Store) RateEnsure(_ context.Context, spec driver.RateSpec, now time.Time) error {
	if _, ok := s.Rates[spec.Key]; ok {
		return nil
	}
	s.Rates[spec.Key] = &driver.Rate{Key: spec.Key, Limit: spec.Limit, Period: spec.Period}
	ring := make([]Slot, spec.Limit)
	for i := range ring {
		ring[i] = Slot{Slot: i, At: time.Unix(0, 0)}
	}
	s.Rings[spec.Key] = ring
	return nil
}

func (s *Store) RateLock(_ context.Context, key string) (driver.Rate, bool, error) {
	r, ok := s.Rates[key]
	if !ok {
		return driver.Rate{}, false, nil
	}
	out := *r
	if o, ok := s.RateLimits[key]; ok {
		out.Override = o
	}
	out.Adapt = s.Adapts[driver.RateLine(key)].Limit
	return out, true, nil
}

func (s *Store) PolicyGetRate(_ context.Context, queue string) (driver.RateSpec, error) {
	p := s.Policies[queue]
	return driver.RateSpec{Limit: p.MaxStartsPerKey, Period: p.StartsPeriod}, nil
}

func (s *Store) RateTryLock(ctx context.Context, key string) (driver.Rate, bool, error) {
	return s.RateLock(ctx, key)
}

func (s *Store) RateSave(_ context.Context, r driver.Rate, _ time.Time) error {
	r.Override, r.Adapt = driver.RateSpec{}, 0
	s.Rates[r.Key] = &r
	return nil
}

// byAge sorts a ring oldest start first.
func byAge(a, b Slot) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Slot, b.Slot)) }

func (s *Store) RateResizeRing(_ context.Context, key string, from, to int) error {
	ring := s.Rings[key]
	switch {
	case to > from:
		top := -1
		for _, sl := range ring {
			top = max(top, sl.Slot)
		}
		for i := range to - from {
			ring = append(ring, Slot{Slot: top + 1 + i, At: time.Unix(0, 0)})
		}
	case to < from:
		slices.SortFunc(ring, byAge)
		ring = ring[from-to:]
	}
	s.Rings[key] = ring
	return nil
}

func (s *Store) RateSlotListFree(_ context.Context, key string, notAfter time.Time, n int) ([]int, error) {
	ring := slices.Clone(s.Rings[key])
	slices.SortFunc(ring, byAge)
	var out []int
	for _, sl := range ring {
		if len(out) == n || sl.At.After(notAfter) {
			break
		}
		if sl.Job == 0 {
			out = append(out, sl.Slot)
		}
	}
	return out, nil
}

func (s *Store) RateSlotSetMany(_ context.Context, p driver.RateSlotsParams) error {
	key, slots, jobIDs, at := p.Key, p.Slots, p.JobIDs, p.At
	ring := s.Rings[key]
	for i, n := range slots {
		for j := range ring {
			if ring[j].Slot == n {
				ring[j].At, ring[j].Job = at, jobIDs[i]
			}
		}
	}
	return nil
}

func (s *Store) RateSlotUnstamp(_ context.Context, p driver.RateUnstampParams) (bool, error) {
	key, slot, stamped, to := p.Key, p.Slot, p.Stamped, p.To
	ring := s.Rings[key]
	for j := range ring {
		if ring[j].Slot == slot && ring[j].Job == 0 && ring[j].At.Equal(stamped) {
			ring[j].At = to
			return true, nil
		}
	}
	return false, nil
}

func (s *Store) RateSlotListReserved(_ context.Context, key string, jobIDs []int64) (map[int64]int, error) {
	out := map[int64]int{}
	for _, sl := range s.Rings[key] {
		if sl.Job != 0 && slices.Contains(jobIDs, sl.Job) {
			out[sl.Job] = sl.Slot
		}
	}
	return out, nil
}

func (s *Store) RateSlotCancelReservation(_ context.Context, key string, jobID int64) error {
	ring := s.Rings[key]
	for j := range ring {
		if ring[j].Job == jobID {
			ring[j].At, ring[j].Job = time.Unix(0, 0), 0
		}
	}
	return nil
}

func (s *Store) RateSlotRepairReservations(_ context.Context, key string) (int, error) {
	n := 0
	ring := s.Rings[key]
	for j := range ring {
		if id := ring[j].Job; id != 0 {
			if r, ok := s.Jobs[id]; !ok || (r.State != driver.StateReady && r.State != driver.StateRunning) {
				ring[j].At, ring[j].Job = time.Unix(0, 0), 0
				n++
			}
		}
	}
	return n, nil
}

func (s *Store) RateSlotGetOldest(_ context.Context, key string, except []int) (time.Time, error) {
	oldest := driver.Reserved
	for _, sl := range s.Rings[key] {
		if sl.At.Before(oldest) && !slices.Contains(except, sl.Slot) {
			oldest = sl.At
		}
	}
	return oldest, nil
}

func (s *Store) RateListDue(_ context.Context, now time.Time, n int) (driver.RateDue, error) {
	var out []*driver.Rate
	due := driver.RateDue{Keys: []string{}}
	for _, r := range s.Rates {
		switch {
		case r.Waiting == 0 || r.NextAt.IsZero():
		case !r.NextAt.After(now):
			out = append(out, r)
		case !due.LaterOK || r.NextAt.Before(due.Later):
			due.Later, due.LaterOK = r.NextAt, true
		}
	}
	slices.SortFunc(out, func(a, b *driver.Rate) int { return a.NextAt.Compare(b.NextAt) })
	for _, r := range out[:min(n, len(out))] {
		due.Keys = append(due.Keys, r.Key)
	}
	return due, nil
}

func (s *Store) RateNextAt(context.Context) (time.Time, bool, error) {
	var next time.Time
	for _, r := range s.Rates {
		if !r.NextAt.IsZero() && (next.IsZero() || r.NextAt.Before(next)) {
			next = r.NextAt
		}
	}
	return next, !next.IsZero(), nil
}

func (s *Store) RateDeleteIdle(_ context.Context, now time.Time, n int) (int, error) {
	deleted := 0
	for key, r := range s.Rates {
		idle := r.Waiting == 0 && s.lineLen(key) == 0
		for _, sl := range s.Rings[key] {
			idle = idle && sl.Job == 0 && !sl.At.After(now.Add(-r.Period))
		}
		if idle && deleted < n {
			delete(s.Rates, key)
			delete(s.Rings, key)
			deleted++
		}
	}
	return deleted, nil
}

func (s *Store) KeyRateSet(_ context.Context, spec driver.RateSpec, _ time.Time) error {
	s.RateLimits[spec.Key] = spec
	return nil
}

func (s *Store) KeyRateDelete(_ context.Context, key string) (bool, error) {
	_, ok := s.RateLimits[key]
	delete(s.RateLimits, key)
	return ok, nil
}

func (s *Store) JobRateGetLatest(_ context.Context, key string) (driver.RateSpec, bool, error) {
	var best *Row
	for _, r := range s.Jobs {
		if r.Rate.Key == key && driver.Executes(r.State) || r.Rate.Key == key && r.State == driver.StateRunning {
			if best == nil || r.ID > best.ID {
				best = r
			}
		}
	}
	if best == nil {
		return driver.RateSpec{}, false, nil
	}
	if best.Rate.Limit == 0 {
		p := s.Policies[best.Queue]
		return driver.RateSpec{Key: key, Limit: p.MaxStartsPerKey, Period: p.StartsPeriod}, true, nil
	}
	return best.Rate, true, nil
}

func (s *Store) RateGet(ctx context.Context, key string, since time.Time) (driver.Rate, int, bool, error) {
	r, ok, err := s.RateLock(ctx, key)
	recent := 0
	for _, sl := range s.Rings[key] {
		if sl.Job == 0 && sl.At.After(since) {
			recent++
		}
	}
	return r, recent, ok, err
}

func (s *Store) RateList(ctx context.Context, after string, n int) ([]driver.Rate, error) {
	var keys []string
	for k := range s.Rates {
		if k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []driver.Rate
	for _, k := range keys[:min(n, len(keys))] {
		r, _, _ := s.RateLock(ctx, k)
		out = append(out, r)
	}
	return out, nil
}

func (s *Store) LineGetKey(_ context.Context, jobID int64) (string, bool, error) {
	r, ok := s.Jobs[jobID]
	if !ok || r.State != driver.StateBlocked {
		return "", false, nil
	}
	return r.line(), true, nil
}

func (s *Store) RateListGroups(_ context.Context, n int) ([]driver.RateGroupStats, error) {
	by := map[string]*driver.RateGroupStats{}
	for key, r := range s.Rates {
		g := driver.GroupOf(key)
		if by[g] == nil {
			by[g] = &driver.RateGroupStats{Group: g}
		}
		by[g].Keys++
		by[g].Waiting += r.Waiting
		if r.Waiting > 0 {
			by[g].Throttled++
		}
	}
	var out []driver.RateGroupStats
	for _, g := range by {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b driver.RateGroupStats) int { return cmp.Compare(a.Group, b.Group) })
	return out[:min(n, len(out))], nil
}

// lineLen counts the jobs in key's rate line.
func (s *Store) lineLen(key string) int {
	n := 0
	for _, r := range s.Jobs {
		if r.State == driver.StateBlocked && r.Line == driver.RateLine(key) {
			n++
		}
	}
	return n
}

func (s *Store) RateListStrayLines(_ context.Context, n int) ([]string, error) {
	var keys []string
	for key, r := range s.Rates {
		if r.Waiting == 0 && s.lineLen(key) > 0 {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys[:min(n, len(keys))], nil
}
