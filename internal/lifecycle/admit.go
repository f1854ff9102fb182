// Package lifecycle moves jobs between states. Each function runs inside
// the caller's transaction and changes the job's execution row and its
// key's semaphore together, so a crash between the two cannot happen.
// A new unique job is checked against its unique key before admission
// (unique.go), so a duplicate never takes a slot.
package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/semaphore"
)

// Store is what moving jobs between states writes: jobs, their claims
// and their keys' semaphores.
type Store interface {
	driver.JobStore
	driver.UniqueStore
	driver.ClaimStore
	driver.SemaphoreStore
	driver.RateStore
}

// Admission leaves a job in one of these states: ready (holding a slot if
// keyed), blocked (waiting for its key's slot), discarded (its key had no
// slot; nothing kept for a new job) or scheduled (due later; admitted
// when due).

type candidate struct {
	index    int // in the caller's jobs
	limit    driver.Limit
	rate     driver.RateSpec
	line     string // the rate line a blocked rated job waits in; "" for its key's
	slot     int    // the rate slot reserved for a ready rated job
	queue    string
	priority int
	outcome  driver.JobState
	reason   string // why it was discarded
	heldBy   int64  // a holder of the key, when discarded
}

// admit decides each due candidate's outcome. Keys are locked in sorted
// order, so two transactions admitting overlapping keys cannot deadlock.
// Within a key, higher priority takes the free slots first, then input
// order; the rest block or are discarded by their own OnConflict. It
// returns what the locks promoted: jobs already blocked take any free
// slot before new ones are admitted.
func admit(ctx context.Context, ex Store, cands []*candidate, now time.Time) (driver.Promotion, error) {
	var promoted driver.Promotion
	byKey := map[string][]*candidate{}
	for _, c := range cands {
		if c.limit.Key == "" {
			c.outcome = driver.StateReady
			continue
		}
		byKey[c.limit.Key] = append(byKey[c.limit.Key], c)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// Lock every key first, in key order (one round trip for the batch
	// where the driver is a driver.BatchLocker); each key's jobs then
	// decide against its locked semaphore, and all are saved at the end.
	limits, queues := make([]driver.Limit, len(keys)), make([]string, len(keys))
	for i, key := range keys {
		group := byKey[key]
		slices.SortStableFunc(group, func(a, b *candidate) int { return cmp.Compare(b.priority, a.priority) })
		limits[i], queues[i] = group[0].limit, group[0].queue
	}
	sems, err := semaphore.LockMany(ctx, ex, limits, queues, now)
	if err != nil {
		return promoted, err
	}
	for i, key := range keys {
		group, sem := byKey[key], sems[i]
		// Jobs already blocked on the key take any free slot first.
		if err := sem.PromoteBlocked(ctx); err != nil {
			return promoted, err
		}
		promoted.Add(sem.Promoted())
		granted := sem.Wait(len(group))
		holder := keyHolder{key: key}
		for i, c := range group {
			switch {
			case i < granted:
				c.outcome = driver.StateReady
			case c.limit.OnConflict == driver.Discard:
				if c.heldBy, err = holder.read(ctx, ex); err != nil {
					return promoted, err
				}
				c.outcome = driver.StateDiscarded
				c.reason = fmt.Sprintf("concurrency key %q has no free slot (limit %d)%s and the job discards on conflict", key, sem.Limit(), holder)
			case sem.BacklogFull():
				if c.heldBy, err = holder.read(ctx, ex); err != nil {
					return promoted, err
				}
				c.outcome = driver.StateDiscarded
				c.reason = fmt.Sprintf("concurrency key %q has no free slot%s and already has %d jobs waiting, its MaxBlocked", key, holder, sem.MaxBlocked())
			default:
				c.outcome = driver.StateBlocked
				sem.Block(1)
			}
		}
	}
	if err := semaphore.SaveMany(ctx, ex, sems); err != nil {
		return promoted, err
	}
	return promoted, nil
}

// Verdict is admission's decision on one job.
type Verdict struct {
	// State: ready, blocked, scheduled or discarded; for a duplicate, the
	// state of the job it duplicates.
	State  driver.JobState
	Reason string // why it was discarded, or is a duplicate
	// HeldBy is one holder of the key of a discarded job; 0 when none is known.
	HeldBy int64
	// Duplicate: not stored, since job DuplicateOf has its unique key.
	Duplicate   bool
	DuplicateOf int64
}

// Enqueue admits new jobs and inserts every one not discarded. Jobs due
// later are stored scheduled and admitted when the dispatcher promotes
// them. A unique job that duplicates one already stored (or an earlier
// one of jobs) is neither admitted nor stored. It also returns what
// admission promoted of the jobs already blocked on the keys. A job with
// a rate key but no rate of its own whose queue's policy has none either
// is refused (ErrNoRate), and so is the whole batch.
func Enqueue(ctx context.Context, ex Store, jobs []*driver.NewJob, now time.Time) ([]Verdict, driver.Promotion, error) {
	if err := checkPolicyRates(ctx, ex, jobs); err != nil {
		return nil, driver.Promotion{}, err
	}
	dups, err := checkUnique(ctx, ex, jobs)
	if err != nil {
		return nil, driver.Promotion{}, err
	}
	cands := make([]*candidate, len(jobs))
	var due []*candidate
	for i, j := range jobs {
		if _, dup := dups[i]; dup {
			continue
		}
		cands[i] = &candidate{index: i, limit: j.Limit, rate: j.Rate, queue: j.Queue, priority: j.Priority, outcome: driver.StateScheduled}
		if !j.ScheduledAt.After(now) {
			due = append(due, cands[i])
		}
	}
	promoted, err := admit(ctx, ex, due, now)
	if err != nil {
		return nil, promoted, err
	}
	rates, err := admitRates(ctx, ex, due, now)
	if err != nil {
		return nil, promoted, err
	}
	results := make([]Verdict, len(jobs))
	kept := make([]*driver.NewJob, 0, len(jobs))
	for i, c := range cands {
		if c == nil {
			continue
		}
		results[i] = Verdict{State: c.outcome, Reason: c.reason, HeldBy: c.heldBy}
		switch c.outcome {
		case driver.StateReady:
			jobs[i].State = driver.StateReady
		case driver.StateBlocked:
			jobs[i].State, jobs[i].Line = driver.StateBlocked, c.line
		case driver.StateScheduled:
			jobs[i].State = driver.StateScheduled
		case driver.StateDiscarded:
			continue
		}
		kept = append(kept, jobs[i])
	}
	if err := ex.InsertJobs(ctx, now, kept); err != nil {
		return nil, promoted, err
	}
	if err := rates.finish(ctx, func(c *candidate) int64 { return jobs[c.index].ID }); err != nil {
		return nil, promoted, err
	}
	if dups == nil {
		return results, promoted, nil
	}
	if err := markUnique(ctx, ex, kept); err != nil {
		return nil, promoted, err
	}
	for i, d := range dups {
		results[i] = duplicateVerdict(d, jobs, results)
	}
	return results, promoted, nil
}

// ErrNoRate refuses a job that leaves its rate to its queue's policy
// when the policy sets none: its starts would count against no rate.
var ErrNoRate = errors.New("the job's rate key has no rate")

// checkPolicyRates refuses (ErrNoRate) the first job with a rate key and
// no limit of its own whose queue's policy sets no MaxStartsPerKey. Each
// queue's policy is read once. A job admitted later (due scheduled, a
// retry) whose policy rate was removed meanwhile is not refused: it keeps
// its key's stored rate (see ratelimit.Lock).
func checkPolicyRates(ctx context.Context, ex Store, jobs []*driver.NewJob) error {
	rated := map[string]bool{}
	for _, j := range jobs {
		if j.Rate.Key == "" || j.Rate.Limit > 0 {
			continue
		}
		has, seen := rated[j.Queue]
		if !seen {
			p, err := ex.PolicyRate(ctx, j.Queue)
			if err != nil {
				return err
			}
			has = p.Limit > 0
			rated[j.Queue] = has
		}
		if !has {
			return fmt.Errorf("%w: job %s has rate key %q but its Rate sets no Limit and Period, and queue %q has no policy "+
				"MaxStartsPerKey: set Rate.Limit and Rate.Period (or WithRateKey's limit and period), or sync a Policy for queue %q "+
				"with MaxStartsPerKey and StartsPeriod", ErrNoRate, j.Kind, j.Rate.Key, j.Queue, j.Queue)
		}
	}
	return nil
}

// PromoteScheduled admits up to max scheduled jobs that are due, as if
// they were enqueued now. It returns the jobs it took, what admission did
// with each, and what it promoted of the jobs already blocked.
func PromoteScheduled(ctx context.Context, ex Store, max int, now time.Time) ([]*driver.Job, []driver.JobState, driver.Promotion, error) {
	jobs, err := ex.TakeDueScheduled(ctx, now, max)
	if err != nil || len(jobs) == 0 {
		return nil, nil, driver.Promotion{}, err
	}
	outcomes, promoted, err := admitExisting(ctx, ex, jobs, now)
	return jobs, outcomes, promoted, err
}

// admitExisting admits jobs that are already stored (due scheduled jobs,
// immediate retries) and writes their new execution rows. A discarded one
// is finished as discarded: it was accepted once, so it is not deleted.
func admitExisting(ctx context.Context, ex Store, jobs []*driver.Job, now time.Time) ([]driver.JobState, driver.Promotion, error) {
	cands := make([]*candidate, len(jobs))
	for i, j := range jobs {
		cands[i] = &candidate{index: i, limit: j.Limit, rate: j.Rate, queue: j.Queue, priority: j.Priority}
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
	var ready, blocked []driver.Execution
	for i, c := range cands {
		j := jobs[i]
		outcomes[i] = c.outcome
		row := driver.Execution{JobID: j.ID, Queue: j.Queue, Priority: j.Priority, Key: cmp.Or(c.line, j.Limit.Key), At: now}
		switch c.outcome {
		case driver.StateReady:
			ready = append(ready, row)
		case driver.StateBlocked:
			blocked = append(blocked, row)
		case driver.StateDiscarded:
			if err := ex.FinishJob(ctx, j.ID, now, true); err != nil {
				return nil, promoted, err
			}
		}
	}
	if err := ex.InsertExecutions(ctx, driver.StateReady, ready); err != nil {
		return nil, promoted, err
	}
	if err := ex.InsertExecutions(ctx, driver.StateBlocked, blocked); err != nil {
		return nil, promoted, err
	}
	if err := rates.finish(ctx, func(c *candidate) int64 { return jobs[c.index].ID }); err != nil {
		return nil, promoted, err
	}
	return outcomes, promoted, nil
}
