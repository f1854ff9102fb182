// Package ratelimit is bq's start-rate core: at most Limit job starts per
// Period per rate key, across every process, counted from the starts
// themselves.
//
// A key's ring holds Limit slots, each the instant of one of its last
// Limit starts. A start takes a slot at least one Period old, so any
// window of one Period holds at most Limit starts: two starts on the same
// slot are a Period apart, and Limit+1 starts need a slot twice.
//
// The instant a start records is not the claim's but the latest the run
// may begin, the claim plus its slack, plus the slack again: a run that
// has not begun by the first (its process froze, its machine stalled)
// does not run but goes back to the line, giving its start back
// (lifecycle.StartedLate); the second covers the time between the run's
// begin gate and the job's own first reading of the clock (goroutine
// scheduling on a loaded machine). So no start the job itself observes
// is earlier than a Period after the slot's last one.
//
// Slots are reserved for the jobs admission makes ready (Reserve), so a
// burst never makes more jobs ready than may start; a job that reaches
// ready by another path (a retry, a promotion of its concurrency key, a
// reaped claim) takes a free slot at its claim or waits in the line.
// Every change of a ring is made with the key's row locked.
package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// StartSlack is how long after its claim a rate-limited run may begin
// when its process starts its runs promptly: a fiftieth of the period,
// within 5 to 15 ms. The ring records the claim plus twice the slack
// (Counted), so it costs at most twice that fraction of the rate.
func StartSlack(period time.Duration) time.Duration {
	return min(max(period/50, 5*time.Millisecond), 15*time.Millisecond)
}

// MaxStartSlack is the most a claim's slack widens to on a process whose
// runs begin late (Slack): an eighth of the period, at most a second,
// never below StartSlack. It costs at most a quarter of the rate, and
// only while the process is slow.
func MaxStartSlack(period time.Duration) time.Duration {
	return max(StartSlack(period), min(period/8, time.Second))
}

// Slack is the start slack of a claim made by a process whose rated runs
// lately began up to lag after their claims (a CPU-starved container, a
// loaded machine): half as much again as the lag, within StartSlack and
// MaxStartSlack. A run's slack only bounds when it may begin; the ring
// counts whatever slack its claim was given, so the rate stays exact.
func Slack(period, lag time.Duration) time.Duration {
	return min(max(lag+lag/2, StartSlack(period)), MaxStartSlack(period))
}

// Store is what a window reads and writes: the key's row and ring, and
// its line (blocked rows of driver.RateLine(key)).
type Store interface {
	driver.RateStore
	LinePromote(ctx context.Context, key string, n int, now time.Time) (driver.Promotion, error)
}

// Window is one key's row and ring, locked until the transaction ends.
type Window struct {
	ex       Store
	row      driver.Rate
	top      int // the resolved limit, before its adaptive cap
	now      time.Time
	promoted driver.Promotion
	// oldest is the ring's earliest instant but the slots about to be
	// stamped, once Prepare read it.
	oldest   time.Time
	prepared bool
	// slack: how long after its claim a run this window starts may
	// begin (Slack); StartSlack of the period until Cover sets it.
	slack time.Duration
}

// Resolve is the key's limit and period: an override (SetKeyRate) beats
// the job's spec (its own Rate, else its queue policy's, as Lock
// resolved it); a spec with no limit keeps the stored one.
func Resolve(spec driver.RateSpec, stored driver.Rate) (int, time.Duration) {
	switch {
	case stored.Override.Limit > 0:
		return stored.Override.Limit, stored.Override.Period
	case spec.Limit > 0:
		return spec.Limit, spec.Period
	default:
		return stored.Limit, stored.Period
	}
}

// Lock locks spec.Key's row, creating it and its ring if missing, and
// applies the resolved limit and period: a changed limit resizes the
// ring, keeping its newest starts. A spec with no limit of its own takes
// the default rate of queue's policy (MaxStartsPerKey), read now, so a
// changed policy applies from the next admission or start; with none
// either, what is stored is kept, and a key never stored is not locked
// (nil, nil): no rate applies to it.
func Lock(ctx context.Context, ex Store, spec driver.RateSpec, queue string, now time.Time) (*Window, error) {
	// The policy is read with the row locked: a SyncPolicies that changed
	// it locks the row after its change, to apply it, so either this
	// reads the new policy or the sync applies it after this commits.
	resolve := func() (driver.RateSpec, error) {
		if spec.Limit > 0 || queue == "" {
			return spec, nil
		}
		p, err := ex.PolicyGetRate(ctx, queue)
		if err != nil {
			return spec, err
		}
		return driver.RateSpec{Key: spec.Key, Limit: p.Limit, Period: p.Period}, nil
	}
	// The dispatcher deletes idle rows; one may vanish between the create
	// and the lock, so try again.
	for range 3 {
		row, ok, err := ex.RateLock(ctx, spec.Key)
		if err != nil {
			return nil, err
		}
		resolved, err := resolve()
		if err != nil {
			return nil, err
		}
		if ok {
			w := &Window{ex: ex, row: row, now: now}
			return w, w.apply(ctx, resolved)
		}
		if resolved.Limit <= 0 {
			return nil, nil
		}
		if err := ex.RateEnsure(ctx, resolved, now); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("lock rate key %q: it keeps disappearing", spec.Key)
}

// TryLock locks key's stored row unless another transaction holds it
// (nil, nil then, as for a missing row): maintenance never waits behind
// an admission or a claim, which settle the key themselves.
func TryLock(ctx context.Context, ex Store, key string, now time.Time) (*Window, error) {
	row, ok, err := ex.RateTryLock(ctx, key)
	if err != nil || !ok {
		return nil, err
	}
	w := &Window{ex: ex, row: row, now: now}
	return w, w.apply(ctx, driver.RateSpec{Key: key})
}

func (w *Window) apply(ctx context.Context, spec driver.RateSpec) error {
	limit, period := Resolve(spec, w.row)
	// A rate that adapts (bq.Adaptive) runs at most at its lowered
	// limit: a Lock at admission or start never grows its ring back.
	w.top, limit = limit, driver.Adapted(limit, w.row.Adapt)
	return w.resize(ctx, limit, period)
}

// resize makes the ring limit slots long, keeping its newest starts.
func (w *Window) resize(ctx context.Context, limit int, period time.Duration) error {
	if limit != w.row.Limit {
		if err := w.ex.RateResizeRing(ctx, w.row.Key, w.row.Limit, limit); err != nil {
			return err
		}
	}
	w.row.Limit, w.row.Period = limit, period
	return nil
}

// At makes now the window's clock: the instant its starts are claimed.
func (w *Window) At(now time.Time) *Window {
	w.now = now
	return w
}

// Now is the window's clock.
func (w *Window) Now() time.Time { return w.now }

// Row is the key's state as locked and changed so far.
func (w *Window) Row() driver.Rate { return w.row }

// Promoted is what PromoteLine made ready.
func (w *Window) Promoted() driver.Promotion { return w.promoted }

// Waiting counts the jobs in the key's line.
func (w *Window) Waiting() int { return w.row.Waiting }

// Free returns up to n slots a start may take now.
func (w *Window) Free(ctx context.Context, n int) ([]int, error) {
	if n <= 0 {
		// Every claim had its reservation and no job waits: no read.
		return nil, nil
	}
	return w.ex.RateSlotListFree(ctx, w.row.Key, w.now.Add(-w.row.Period), n)
}

// Reserve holds slots[i] for the ready job jobIDs[i].
func (w *Window) Reserve(ctx context.Context, slots []int, jobIDs []int64) error {
	return w.ex.RateSlotSetMany(ctx, driver.RateSlotsParams{Key: w.row.Key, Slots: slots, JobIDs: jobIDs, At: driver.Reserved})
}

// Cover widens the slack of the runs this window starts to cover the
// lag its process's runs lately began with (Slack).
func (w *Window) Cover(lag time.Duration) { w.slack = Slack(w.row.Period, lag) }

// Slack is how long after its claim a run this window starts may begin.
func (w *Window) Slack() time.Duration {
	if w.slack == 0 {
		return StartSlack(w.row.Period)
	}
	return w.slack
}

// StartBy is the instant a run claimed at `at` must begin by (its begin
// gate).
func (w *Window) StartBy(at time.Time) time.Time { return at.Add(w.Slack()) }

// Counted is the instant the start of a run that must begin by startBy,
// with slack, is stamped with: its StartBy plus the slack again, the most
// the job's own first reading of the clock may lag its begin gate.
func Counted(startBy time.Time, slack time.Duration) time.Time {
	return startBy.Add(slack)
}

// Stamp counts starts on slots, each claimed at `at` and stamped with
// Counted(StartBy(at)). A slot is a start's only after the window's check
// (Free, or its job's reservation).
func (w *Window) Stamp(ctx context.Context, slots []int, at time.Time) error {
	if len(slots) == 0 {
		return nil
	}
	return w.ex.RateSlotSetMany(ctx, driver.RateSlotsParams{Key: w.row.Key, Slots: slots, JobIDs: make([]int64, len(slots)),
		At: Counted(w.StartBy(at), w.Slack())})
}

// Recount sets the jobs counted in the key's line to n, counted from
// its rows.
func (w *Window) Recount(n int) { w.row.Waiting = n }

// Wait counts n more jobs in the key's line (negative: n left it).
func (w *Window) Wait(n int) { w.row.Waiting = max(w.row.Waiting+n, 0) }

// PromoteLine makes ready as many jobs of the key's line as there are
// free slots, highest priority first, FIFO among equals, each with a
// slot reserved.
func (w *Window) PromoteLine(ctx context.Context) error {
	if w.row.Waiting <= 0 {
		return nil
	}
	free, err := w.Free(ctx, w.row.Waiting)
	if err != nil {
		return err
	}
	return w.PromoteInto(ctx, free)
}

// PromoteInto makes ready up to len(free) jobs of the key's line, each
// with one of the free slots reserved.
func (w *Window) PromoteInto(ctx context.Context, free []int) error {
	if w.row.Waiting <= 0 || len(free) == 0 {
		return nil
	}
	p, err := w.ex.LinePromote(ctx, driver.RateLine(w.row.Key), len(free), w.now)
	if err != nil {
		return err
	}
	if p.Jobs < len(free) {
		// Fewer rows than counted: the line is empty.
		w.row.Waiting = 0
	} else {
		w.row.Waiting -= p.Jobs
	}
	if err := w.Reserve(ctx, free[:len(p.JobIDs)], p.JobIDs); err != nil {
		return err
	}
	w.promoted.Add(p)
	return nil
}

// Save writes the row back, with when its line may next move: a Period
// after its oldest start, or a Period from now when every slot is
// reserved (a reservation turns into a start at its job's claim).
func (w *Window) Save(ctx context.Context) error { return w.SaveStamping(ctx, nil, time.Time{}) }

// Prepare reads what SaveStamping needs of the ring but for the slots
// about to be stamped, so that a caller can read its clock after the
// last read of its transaction.
func (w *Window) Prepare(ctx context.Context, stamps []int) error {
	if w.row.Waiting == 0 {
		// No line to time: nothing to read.
		w.prepared = true
		return nil
	}
	oldest, err := w.ex.RateSlotGetOldest(ctx, w.row.Key, stamps)
	w.oldest, w.prepared = oldest, err == nil
	return err
}

// SaveStamping writes the row back and starts on stamps (see Stamp) at
// `at`, last: on PostgreSQL the stamps and the row's write go out with
// the commit, so the clock read for `at` is as late as the transaction
// allows.
func (w *Window) SaveStamping(ctx context.Context, stamps []int, at time.Time) error {
	w.row.NextAt = time.Time{}
	if w.row.Waiting > 0 {
		if !w.prepared {
			if err := w.Prepare(ctx, stamps); err != nil {
				return err
			}
		}
		w.row.NextAt = w.now.Add(w.row.Period)
		if w.oldest.Before(driver.Reserved) {
			w.row.NextAt = w.oldest.Add(w.row.Period)
			if w.row.NextAt.Before(w.now) {
				w.row.NextAt = w.now
			}
		}
	}
	if len(stamps) > 0 {
		if at.IsZero() {
			at = w.now
		}
		// A stamped slot frees a Period after its stamp.
		if free := Counted(w.StartBy(at), w.Slack()).Add(w.row.Period); w.row.Waiting > 0 && free.Before(w.row.NextAt) {
			w.row.NextAt = free
		}
		if err := w.Stamp(ctx, stamps, at); err != nil {
			return err
		}
	}
	w.prepared = false
	return w.ex.RateSave(ctx, w.row, w.now)
}

// Repair frees the slots reserved for jobs that will never start on
// them, and reports how many.
func (w *Window) Repair(ctx context.Context) (int, error) {
	return w.ex.RateSlotRepairReservations(ctx, w.row.Key)
}
