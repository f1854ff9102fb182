// Package memstore is an in-memory store of jobs, claims and semaphores
// for unit tests of the engine's rules (package semaphore, lifecycle):
// the tables a driver keeps, as maps, with no transactions and no locks.
// It implements driver.JobStore, driver.ClaimStore and
// driver.SemaphoreStore as their contracts in package driver say.
package memstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Row is a job with the table that holds it.
type Row struct {
	driver.Job
	State     driver.JobState
	LastError string
	Fence     int64 // of its claim, while running
	UniqueKey string
	// CancelAt is its claim's cancel mark (ClaimMarkCancel); zero when none.
	CancelAt time.Time
	// Line is the key of the line a blocked job waits in; "" for its
	// concurrency key's.
	Line string
}

// line is the key of the line r waits in while blocked.
func (r *Row) line() string { return cmp.Or(r.Line, r.Limit.Key) }

// Store holds the rows. Its fields are for tests to arrange and inspect.
type Store struct {
	Jobs       map[int64]*Row
	Semaphores map[string]*driver.Semaphore
	Overrides  map[string]int
	Policies   map[string]driver.Policy
	Paused     map[string]time.Time // paused queues (lifecycle.Claim's gate)
	Rates      map[string]*driver.Rate
	Rings      map[string][]Slot
	RateLimits map[string]driver.RateSpec // SetKeyRate overrides
	Weights    map[string]int             // fair-share weights by key
	Deps       []driver.Dependency        // edges between jobs (DependsOn)
	Waits      map[int64]*driver.Waiting  // waiting jobs' rows
	Outputs    map[int64][]byte           // jobs' outputs (JobSetOutput)
	Cancels    map[int64][]int64          // jobs a failure cancelled, by the failed job
	Adapts     map[string]driver.KeyAdapt // adaptive limits by key
	nextID     int64
	nextFence  int64
}

// New returns an empty store.
func New() *Store {
	return &Store{Jobs: map[int64]*Row{}, Semaphores: map[string]*driver.Semaphore{},
		Overrides: map[string]int{}, Policies: map[string]driver.Policy{},
		Paused: map[string]time.Time{}, Rates: map[string]*driver.Rate{}, Rings: map[string][]Slot{},
		RateLimits: map[string]driver.RateSpec{}, Weights: map[string]int{}, Waits: map[int64]*driver.Waiting{},
		Adapts: map[string]driver.KeyAdapt{}}
}

var (
	_ driver.JobStore        = (*Store)(nil)
	_ driver.ClaimStore      = (*Store)(nil)
	_ driver.SemaphoreStore  = (*Store)(nil)
	_ driver.UniqueStore     = (*Store)(nil)
	_ driver.DependencyStore = (*Store)(nil)
	_ driver.AdaptStore      = (*Store)(nil)
)

// has reports whether key is one of the row's concurrency keys.
func (r *Row) has(key string) bool {
	return slices.ContainsFunc(r.Keys(), func(l driver.Limit) bool { return l.Key == key })
}

// Of returns the jobs of key (any of their keys; "": unkeyed jobs) in
// state, in id order.
func (s *Store) Of(key string, state driver.JobState) []*Row {
	var out []*Row
	for _, r := range s.Jobs {
		if (r.has(key) || key == r.Limit.Key) && r.State == state {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *Row) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func (s *Store) JobInsertMany(_ context.Context, now time.Time, jobs []*driver.NewJob) error {
	if err := driver.CheckNewJobs(jobs); err != nil {
		return err
	}
	for _, j := range jobs {
		s.nextID++
		j.ID = s.nextID
		s.Jobs[j.ID] = &Row{State: j.State, Job: driver.Job{ID: j.ID, Kind: j.Kind, Queue: j.Queue, Args: j.Args,
			Priority: j.Priority, MaxAttempts: j.MaxAttempts, Limit: j.Limit, More: j.More, Slots: j.Slots, Rate: j.Rate, ScheduledAt: j.ScheduledAt,
			CreatedAt: now, Metadata: j.Metadata, Tags: j.Tags}, Line: j.Line}
	}
	return nil
}

func (s *Store) ExecutionInsertMany(_ context.Context, state driver.JobState, rows []driver.Execution) error {
	for _, x := range rows {
		r, ok := s.Jobs[x.JobID]
		if !ok {
			return errors.New("memstore: execution of a missing job")
		}
		r.State, r.Line = state, ""
		if state == driver.StateScheduled {
			r.ScheduledAt = x.At
		}
		if state == driver.StateBlocked && x.Key != r.Limit.Key {
			r.Line = x.Key
		}
	}
	return nil
}

func (s *Store) end(id int64, state driver.JobState) error {
	r, ok := s.Jobs[id]
	if !ok {
		return errors.New("memstore: no such job")
	}
	r.State = state
	return nil
}

func (s *Store) JobFinish(_ context.Context, id int64, _ time.Time, discarded bool) error {
	if discarded {
		return s.end(id, driver.StateDiscarded)
	}
	s.Jobs[id].Attempt++
	return s.end(id, driver.StateCompleted)
}

func (s *Store) JobDeleteMany(_ context.Context, ids []int64) error {
	for _, id := range ids {
		delete(s.Jobs, id)
	}
	return nil
}

func (s *Store) JobFailAttempt(_ context.Context, id int64, msg string) error {
	r := s.Jobs[id]
	r.Attempt++
	r.LastError = msg
	return nil
}

func (s *Store) FailedInsert(_ context.Context, id int64, msg string, _ time.Time) error {
	s.Jobs[id].LastError = msg
	return s.end(id, driver.StateFailed)
}

func (s *Store) FailedDelete(_ context.Context, id int64) (bool, error) {
	r, ok := s.Jobs[id]
	if !ok || r.State != driver.StateFailed {
		return false, nil
	}
	r.State = ""
	return true, nil
}

func (s *Store) JobGet(_ context.Context, id int64) (*driver.JobInfo, bool, error) {
	r, ok := s.Jobs[id]
	if !ok {
		return nil, false, nil
	}
	return &driver.JobInfo{Job: r.Job, State: r.State, LastError: r.LastError}, true, nil
}

func (s *Store) ScheduledTakeDue(_ context.Context, now time.Time, max int) ([]*driver.Job, error) {
	var out []*driver.Job
	for _, r := range s.sorted(func(r *Row) bool { return r.State == driver.StateScheduled && !r.ScheduledAt.After(now) }) {
		if len(out) == max {
			break
		}
		r.State = ""
		out = append(out, &r.Job)
	}
	return out, nil
}

func (s *Store) JobHoldSlot(_ context.Context, id int64, held bool) error {
	if r, ok := s.Jobs[id]; ok && r.Limit.Sequence {
		r.SlotHeld = held
	}
	return nil
}

func (s *Store) ScheduledDebounce(_ context.Context, p driver.DebounceParams) (bool, error) {
	r, ok := s.Jobs[p.JobID]
	if !ok || r.State != driver.StateScheduled || !r.ScheduledAt.After(p.Now) {
		return false, nil
	}
	r.ScheduledAt = p.At
	if p.Args != nil {
		r.Args = p.Args
	}
	return true, nil
}

// sorted returns the rows that match in promotion order: priority
// descending, then id.
func (s *Store) sorted(match func(*Row) bool) []*Row {
	var out []*Row
	for _, r := range s.Jobs {
		if match(r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *Row) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.ID, b.ID))
	})
	return out
}

func (s *Store) SemaphoreEnsure(_ context.Context, l driver.Limit, now time.Time) error {
	if _, ok := s.Semaphores[l.Key]; !ok {
		n := max(l.To, 1)
		s.Semaphores[l.Key] = &driver.Semaphore{Key: l.Key, Value: n, Limit: n, Duration: l.Duration, ExpiresAt: now.Add(l.Duration)}
	}
	return nil
}

func (s *Store) SemaphoreLock(_ context.Context, key, queue string) (driver.Semaphore, bool, error) {
	row, ok := s.Semaphores[key]
	if !ok {
		return driver.Semaphore{}, false, nil
	}
	out := *row
	out.Override = s.Overrides[key]
	out.Adapt = s.Adapts[key].Limit
	out.Policy = s.Policies[queue]
	return out, true, nil
}

func (s *Store) SemaphoreTryLock(_ context.Context, key string) (bool, error) {
	_, ok := s.Semaphores[key]
	return ok, nil
}

func (s *Store) SemaphoreSave(_ context.Context, sem driver.Semaphore) error {
	sem.Override, sem.Adapt, sem.Policy = 0, 0, driver.Policy{}
	s.Semaphores[sem.Key] = &sem
	return nil
}

func (s *Store) LinePromote(_ context.Context, key string, n int, _ time.Time) (driver.Promotion, error) {
	var p driver.Promotion
	for _, r := range s.sorted(func(r *Row) bool { return r.State == driver.StateBlocked && r.line() == key }) {
		if p.Jobs == n {
			break
		}
		r.State, r.Line = driver.StateReady, ""
		p.Jobs++
		p.AddQueue(r.Queue)
		p.JobIDs = append(p.JobIDs, r.ID)
	}
	return p, nil
}

func (s *Store) HolderCount(_ context.Context, key string) (driver.HolderCount, error) {
	var n driver.HolderCount
	for _, r := range s.Jobs {
		switch {
		case r.State == driver.StateBlocked && r.line() == key:
			n.Blocked++ // in key's line
			if driver.HeadByHead(len(r.Keys()), r.Slots) {
				n.Multi++
			}
		case !r.has(key):
		case r.State == driver.StateReady || r.State == driver.StateRunning:
			n.Holders += driver.SlotsOf(r.Slots)
		case (r.State == driver.StateScheduled || r.State == driver.StateFailed) && r.SlotHeld:
			n.Holders += driver.SlotsOf(r.Slots) // a sequence's retry or halting failure, keeping its slot
		case r.State == driver.StateBlocked && strings.HasPrefix(r.line(), driver.RateLinePrefix):
			n.Holders += driver.SlotsOf(r.Slots) // waiting in a rate line, its slots kept
		}
	}
	return n, nil
}

func (s *Store) LineListHeads(_ context.Context, key string, n int) ([]driver.LineHead, error) {
	var out []driver.LineHead
	for _, r := range s.sorted(func(r *Row) bool { return r.State == driver.StateBlocked && r.line() == key }) {
		if len(out) == n {
			break
		}
		out = append(out, driver.LineHead{JobID: r.ID, Queue: r.Queue, Priority: r.Priority, Keys: r.Keys(), Slots: driver.SlotsOf(r.Slots)})
	}
	return out, nil
}

func (s *Store) LineMove(_ context.Context, id int64, from, to string) error {
	r, ok := s.Jobs[id]
	if !ok || r.State != driver.StateBlocked || r.line() != from {
		return fmt.Errorf("memstore: job %d is not blocked in the line of %q", id, from)
	}
	r.Line = to
	if to == r.Limit.Key {
		r.Line = ""
	}
	return nil
}

// Honest reports whether key's semaphore counts its rows: free slots are
// the limit minus its holders (ready and running jobs), and blocked the
// jobs waiting. It returns a description of the first mismatch, or "".
func (s *Store) Honest(key string) string {
	sem, ok := s.Semaphores[key]
	if !ok {
		return "no semaphore for " + key
	}
	n, _ := s.HolderCount(context.Background(), key)
	switch {
	case n.Holders > sem.Limit:
		return "more holders than the limit"
	case sem.Value != sem.Limit-n.Holders:
		return "free slots do not match the holders"
	case sem.Blocked != n.Blocked:
		return "the blocked count does not match the blocked rows"
	case sem.Multi != n.Multi:
		return "the multi-key count does not match the blocked rows"
	}
	return ""
}

var _ driver.MultiBatcher = (*Store)(nil)

// LineListHeadsMany is LineListHeads key by key: the store has no statements to
// save.
func (s *Store) LineListHeadsMany(ctx context.Context, keys []string, ns []int) ([][]driver.LineHead, error) {
	out := make([][]driver.LineHead, len(keys))
	for i, k := range keys {
		if ns[i] <= 0 {
			continue
		}
		h, err := s.LineListHeads(ctx, k, ns[i])
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// SemaphoreTryLockMany returns the keys' rows: the store has one user at
// a time, so nothing is ever held by another.
func (s *Store) SemaphoreTryLockMany(_ context.Context, keys []string) ([]driver.Semaphore, error) {
	var out []driver.Semaphore
	for _, k := range keys {
		if row, ok := s.Semaphores[k]; ok {
			sem := *row
			sem.Override, sem.Adapt, sem.Policy = 0, 0, driver.Policy{}
			out = append(out, sem)
		}
	}
	return out, nil
}

// LinePromoteFirst is LinePromote key by key.
func (s *Store) LinePromoteFirst(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	out := make([]driver.Promotion, len(keys))
	for i, k := range keys {
		if counts[i] <= 0 {
			continue
		}
		p, err := s.LinePromote(ctx, k, counts[i], now)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// SemaphoreReleaseMany releases key by key (driver.ReleaseOne): the store
// has no set-wise release.
func (s *Store) SemaphoreReleaseMany(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	out := make([]driver.Promotion, len(keys))
	for i, k := range keys {
		p, err := driver.ReleaseOne(ctx, s, k, counts[i], now)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}
