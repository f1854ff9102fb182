package lifecycle

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Dependencies (DependsOn). A job enqueued to wait for others is stored
// waiting: no slot, rate start or place in a line. Each of its
// dependencies is an edge from the job it waits for; the transaction that
// ends that job takes its edges (Settle), so a dependency is counted once,
// by the one transaction whose finish committed:
//
//   - completed: the dependent's count of pending dependencies goes down;
//     at 0 it is admitted, in that transaction, like a new job (its keys'
//     limits, fair share and rate apply then);
//   - failed for good, cancelled or discarded: the dependent is cancelled
//     (and so, in turn, its own dependents), unless it runs even if its
//     dependencies fail, when this counts as done.
//
// Two finishes at the same instant in two processes count down the same
// waiting row, whose lock orders them: only the second sees 0.

// waitPlan is what the dependencies of a new job decided at its enqueue.
type waitPlan struct {
	open           []int64 // the dependencies not ended yet, each once
	pending, total int
	failed         int64 // a dependency that already failed, cancelling the job; 0 when none
}

// DependencyError refuses an enqueue naming a job that does not exist.
type DependencyError struct{ JobID int64 }

func (e *DependencyError) Error() string {
	return fmt.Sprintf("job %d does not exist: DependsOn names jobs already enqueued (finished jobs are "+
		"kept for Config.Retention; under NoRetention a completed job is gone)", e.JobID)
}

// planWaits marks the jobs that jobs depend on (each once, in id order,
// so two enqueues naming the same jobs cannot deadlock) and decides for
// each new job with dependencies how many it still waits for, or which
// failed one cancels it. A job naming one that does not exist refuses the
// whole enqueue (DependencyError).
func planWaits(ctx context.Context, ex Store, jobs []*driver.NewJob) (map[int]waitPlan, error) {
	var ids []int64
	for _, j := range jobs {
		ids = append(ids, j.DependsOn...)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	ends := make(map[int64]driver.DependencyEnd, len(ids))
	for _, id := range ids {
		end, ok, err := ex.DependencyMark(ctx, id)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, &DependencyError{JobID: id}
		}
		ends[id] = end
	}
	plans := map[int]waitPlan{}
	for i, j := range jobs {
		if len(j.DependsOn) == 0 {
			continue
		}
		p := waitPlan{total: len(j.DependsOn)}
		for _, id := range j.DependsOn {
			switch ends[id] {
			case driver.DependencyOpen:
				p.pending++
				p.open = append(p.open, id)
			case driver.DependencyFailed:
				if !j.EvenIfFailed && p.failed == 0 {
					p.failed = id
				}
			}
		}
		plans[i] = p
	}
	return plans, nil
}

// storeWaits writes what planWaits decided for the stored new jobs:
// a waiting row and the edges of those still waiting, a cancelled end
// for those a failed dependency cancels. It returns each one's state.
func storeWaits(ctx context.Context, ex Store, jobs []*driver.NewJob, plans map[int]waitPlan, now time.Time) (map[int]driver.JobState, error) {
	states := map[int]driver.JobState{}
	var edges []driver.Dependency
	for i, p := range plans {
		j := jobs[i]
		switch {
		case p.failed != 0:
			msg := fmt.Sprintf("cancelled: job %d, which it depends on, failed or was cancelled", p.failed)
			if err := ex.JobCancel(ctx, driver.JobCancelParams{JobID: j.ID, Now: now, Msg: msg}); err != nil {
				return nil, err
			}
			if err := ex.DependencyCancelRecord(ctx, p.failed, j.ID); err != nil {
				return nil, err
			}
			states[i] = driver.StateCancelled
		case p.pending > 0:
			w := driver.Waiting{JobID: j.ID, Queue: j.Queue, Priority: j.Priority, Pending: p.pending, Total: p.total, At: now}
			if err := ex.WaitingInsert(ctx, w); err != nil {
				return nil, err
			}
			for _, id := range p.open {
				edges = append(edges, driver.Dependency{JobID: j.ID, DependsOn: id, EvenIfFailed: j.EvenIfFailed})
			}
			states[i] = driver.StateWaiting
		}
	}
	// Only the dependencies still open get an edge: one that ended was
	// counted here, and must not be again should it run once more
	// (retried by hand after failing).
	slices.SortFunc(edges, func(a, b driver.Dependency) int {
		return cmp.Or(cmp.Compare(a.DependsOn, b.DependsOn), cmp.Compare(a.JobID, b.JobID))
	})
	return states, ex.DependencyInsertMany(ctx, edges)
}

// Ending is a job that just ended, for Settle: Completed, or not
// (failed for good, cancelled, discarded).
type Ending struct {
	JobID     int64
	Completed bool
}

// Settle takes the edges of jobs that ended in the caller's transaction
// and counts down or cancels their dependents, as the package comment on
// dependencies says. Dependents whose last dependency completed are
// admitted (or scheduled, when enqueued for later); a dependent cancelled
// or discarded by that settles its own dependents in turn. It returns
// what it made ready or promoted.
func Settle(ctx context.Context, ex Store, ended []Ending, now time.Time) (driver.Promotion, error) {
	var promoted driver.Promotion
	for len(ended) > 0 {
		var next []Ending
		done := map[int64]int{} // dependent -> its dependencies that ended here and count as done
		for _, e := range ended {
			deps, err := ex.DependentsTake(ctx, e.JobID)
			if err != nil {
				return promoted, err
			}
			for _, d := range deps {
				if !e.Completed && !d.EvenIfFailed {
					cancelled, err := cancelWaiting(ctx, ex, d.JobID, e.JobID, now)
					if err != nil {
						return promoted, err
					}
					if cancelled {
						next = append(next, Ending{JobID: d.JobID})
					}
					continue
				}
				done[d.JobID]++
			}
		}
		// Each dependent counted down once, in id order (the order its
		// row is locked in by every settling transaction).
		var due []int64
		for _, id := range slices.Sorted(maps.Keys(done)) {
			left, ok, err := ex.WaitingCountDown(ctx, id, done[id])
			if err != nil {
				return promoted, err
			}
			if ok && left <= 0 {
				due = append(due, id)
			}
		}
		p, err := admitWaiting(ctx, ex, due, now)
		promoted.Add(p)
		if err != nil {
			return promoted, err
		}
		ended = next
	}
	return promoted, nil
}

// cancelWaiting cancels waiting job id, as job dep it waits for failed;
// false when it was not waiting (cancelled by hand meanwhile).
func cancelWaiting(ctx context.Context, ex Store, id, dep int64, now time.Time) (bool, error) {
	took, err := ex.ExecutionDelete(ctx, driver.StateWaiting, id)
	if err != nil || !took {
		return false, err
	}
	msg := fmt.Sprintf("cancelled: job %d, which it depends on, failed or was cancelled", dep)
	if err := ex.JobCancel(ctx, driver.JobCancelParams{JobID: id, Now: now, Msg: msg}); err != nil {
		return false, err
	}
	return true, ex.DependencyCancelRecord(ctx, dep, id)
}

// Rearm takes back what the failure of job by cancelled, as by is
// retried by hand: each job its failure cancelled waits for it again
// (and for its dependencies still open), and so, in turn, do the jobs
// their cancels cancelled. A job cancelled by hand since, or deleted, is
// left alone. It returns how many jobs wait again.
func Rearm(ctx context.Context, ex Store, by int64, now time.Time) (int, error) {
	n := 0
	for todo := []int64{by}; len(todo) > 0; todo = todo[1:] {
		dep := todo[0]
		ids, err := ex.DependencyCancelTake(ctx, dep)
		if err != nil {
			return n, err
		}
		for _, id := range ids {
			ok, err := rearmOne(ctx, ex, id, dep, now)
			if err != nil {
				return n, err
			}
			if ok {
				n++
				todo = append(todo, id)
			}
		}
	}
	return n, nil
}

// rearmOne makes cancelled job id wait for job dep again; false when it
// is not cancelled any more.
func rearmOne(ctx context.Context, ex Store, id, dep int64, now time.Time) (bool, error) {
	info, ok, err := ex.JobGet(ctx, id)
	if err != nil || !ok || info.State != driver.StateCancelled {
		return false, err
	}
	if ok, err := ex.JobRearm(ctx, id); !ok || err != nil {
		return false, err
	}
	open, err := ex.DependencyCountOpen(ctx, id)
	if err != nil {
		return false, err
	}
	w := driver.Waiting{JobID: id, Queue: info.Queue, Priority: info.Priority, Pending: open + 1, Total: open + 1, At: now}
	if err := ex.WaitingInsert(ctx, w); err != nil {
		return false, err
	}
	return true, ex.DependencyInsertMany(ctx, []driver.Dependency{{JobID: id, DependsOn: dep}})
}

// admitWaiting admits the waiting jobs ids whose last dependency
// completed, in id order: due now, through admission (which settles those
// it discards); enqueued for later, scheduled. It returns what admission
// made ready or promoted.
func admitWaiting(ctx context.Context, ex Store, ids []int64, now time.Time) (driver.Promotion, error) {
	var promoted driver.Promotion
	if len(ids) == 0 {
		return promoted, nil
	}
	slices.Sort(ids)
	var jobs []*driver.Job
	var later []driver.Execution
	for _, id := range ids {
		took, err := ex.ExecutionDelete(ctx, driver.StateWaiting, id)
		if err != nil {
			return promoted, err
		}
		if !took {
			continue
		}
		info, ok, err := ex.JobGet(ctx, id)
		if err != nil || !ok {
			return promoted, fmt.Errorf("admit waiting job %d: read it: %w", id, cmpErr(err, ok))
		}
		j := info.Job
		if j.ScheduledAt.After(now) {
			later = append(later, driver.Execution{JobID: id, Queue: j.Queue, Priority: j.Priority, At: j.ScheduledAt})
			continue
		}
		jobs = append(jobs, &j)
	}
	if err := ex.ExecutionInsertMany(ctx, driver.StateScheduled, later); err != nil || len(jobs) == 0 {
		return promoted, err
	}
	outcomes, p, err := admitExisting(ctx, ex, jobs, now)
	promoted.Add(p)
	if err != nil {
		return promoted, err
	}
	for i, j := range jobs {
		if outcomes[i] == driver.StateReady {
			promoted.AddQueue(j.Queue)
		}
	}
	return promoted, nil
}

// cmpErr is err, or, when the read found nothing, an error saying so.
func cmpErr(err error, ok bool) error {
	if err != nil || ok {
		return err
	}
	return fmt.Errorf("it does not exist")
}

// SettleEnded settles the jobs that ended without their edges taken (a
// finish whose settling was left to a second transaction that never
// ran): the dispatcher's repair. A job gone reads as completed (deleted
// as it completed, under NoRetention).
func SettleEnded(ctx context.Context, ex Store, max int, now time.Time) (int, driver.Promotion, error) {
	ids, err := ex.DependencyListEnded(ctx, max)
	if err != nil || len(ids) == 0 {
		return 0, driver.Promotion{}, err
	}
	ended := make([]Ending, 0, len(ids))
	for _, id := range ids {
		end, ok, err := ex.DependencyMark(ctx, id)
		if err != nil {
			return 0, driver.Promotion{}, err
		}
		if ok && end == driver.DependencyOpen {
			continue // retried by hand since: its next end settles it
		}
		ended = append(ended, Ending{JobID: id, Completed: !ok || end == driver.DependencyCompleted})
	}
	p, err := Settle(ctx, ex, ended, now)
	return len(ended), p, err
}
