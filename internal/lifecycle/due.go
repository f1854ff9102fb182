package lifecycle

import (
	"context"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// AdmitDue admits up to max scheduled jobs that are due, as if
// they were enqueued now. It returns the jobs it took, what admission did
// with each, and what it promoted of the jobs already blocked. A
// sequence's job that kept its key's slot while scheduled (a retry, a
// snooze) becomes ready without taking one again: no blocked job could
// take its place meanwhile.
func AdmitDue(ctx context.Context, ex Store, max int, now time.Time) ([]*driver.Job, []driver.JobState, driver.Promotion, error) {
	jobs, err := ex.ScheduledTakeDue(ctx, now, max)
	if err != nil || len(jobs) == 0 {
		return nil, nil, driver.Promotion{}, err
	}
	var admitted, held []*driver.Job
	var rows []driver.Execution
	for _, j := range jobs {
		if !j.SlotHeld {
			admitted = append(admitted, j)
			continue
		}
		held = append(held, j)
		rows = append(rows, driver.Execution{JobID: j.ID, Queue: j.Queue, Priority: j.Priority, At: now})
	}
	for _, j := range held {
		if err := ex.JobHoldSlot(ctx, j.ID, false); err != nil {
			return nil, nil, driver.Promotion{}, err
		}
	}
	if err := ex.ExecutionInsertMany(ctx, driver.StateReady, rows); err != nil {
		return nil, nil, driver.Promotion{}, err
	}
	outcomes := make([]driver.JobState, 0, len(jobs))
	var promoted driver.Promotion
	if len(admitted) > 0 {
		if outcomes, promoted, err = admitExisting(ctx, ex, admitted, now); err != nil {
			return nil, nil, promoted, err
		}
	}
	// The held jobs last: outcomes follow the jobs returned.
	for range held {
		outcomes = append(outcomes, driver.StateReady)
	}
	return append(admitted, held...), outcomes, promoted, nil
}

// admitExisting admits jobs that are already stored (due scheduled jobs,
// immediate retries) and writes their new execution rows. A discarded one
// is finished as discarded: it was accepted once, so it is not deleted.
func admitExisting(ctx context.Context, ex Store, jobs []*driver.Job, now time.Time) ([]driver.JobState, driver.Promotion, error) {
	cands := make([]*candidate, len(jobs))
	for i, j := range jobs {
		cands[i] = newCandidate(i, j, "")
	}
	promoted, err := admit(ctx, ex, cands, now)
	if err != nil {
		return nil, promoted, err
	}
	rates, err := admitRates(ctx, ex, cands, now)
	if err != nil {
		return nil, promoted, err
	}
	outcomes := make([]driver.JobState, len(jobs))
	var rows placement
	var discarded []Ending
	for i, c := range cands {
		j := jobs[i]
		outcomes[i] = c.outcome
		if c.outcome == driver.StateDiscarded {
			if err := ex.JobFinish(ctx, j.ID, now, true); err != nil {
				return nil, promoted, err
			}
			discarded = append(discarded, Ending{JobID: j.ID})
			continue
		}
		rows.place(c, j.ID, j.Queue, j.Priority, j.Limit.Key, now)
	}
	if err := rows.write(ctx, ex); err != nil {
		return nil, promoted, err
	}
	if err := rates.finish(ctx, func(c *candidate) int64 { return jobs[c.index].ID }); err != nil {
		return nil, promoted, err
	}
	// A discarded job ended: the jobs waiting for it learn it.
	more, err := Settle(ctx, ex, discarded, now)
	promoted.Add(more)
	return outcomes, promoted, err
}
