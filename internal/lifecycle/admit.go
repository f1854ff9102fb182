// Package lifecycle moves jobs between states. Each function runs inside
// the caller's transaction and changes the job's execution row and its
// key's semaphore together, so a crash between the two cannot happen.
// A new unique job is checked against its unique key before admission
// (unique.go), so a duplicate never takes a slot.
package lifecycle

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/semaphore"
)

// Store is what moving jobs between states writes: jobs, their claims
// and their keys' semaphores.
type Store interface {
	driver.JobStore
	driver.UniqueStore
	driver.ClaimStore
	driver.SemaphoreStore
	driver.RateStore
	driver.DependencyStore
}

// Admission leaves a job in one of these states: ready (holding a slot if
// keyed), blocked (waiting for its key's slot), discarded (its key had no
// slot; nothing kept for a new job) or scheduled (due later; admitted
// when due).

type candidate struct {
	index    int // in the caller's jobs
	limit    driver.Limit
	keys     []driver.Limit // every concurrency key: limit first, then the job's More
	rate     driver.RateSpec
	line     string // the line a blocked job waits in; "" for its key's
	slot     int    // the rate slot reserved for a ready rated job
	queue    string
	priority int
	slots    int // the slots it takes of each of its keys
	outcome  driver.JobState
	reason   string // why it was discarded
	heldBy   int64  // a holder of the key, when discarded
	wait     Wait   // a blocked job's expected wait, or why it was refused
	// fresh: a new job that does not replace (Admit), the only kind its
	// queue policy's MaxWait may refuse; one accepted once (scheduled,
	// retried, promoted) or replacing its key's queued jobs never is.
	fresh bool
}

func newCandidate(index int, j *driver.Job, outcome driver.JobState) *candidate {
	return &candidate{index: index, limit: j.Limit, keys: j.Keys(), rate: j.Rate, queue: j.Queue, priority: j.Priority,
		slots: driver.SlotsOf(j.Slots), outcome: outcome}
}

// admit decides each due candidate's outcome. Keys are locked in sorted
// order, so two transactions admitting overlapping keys cannot deadlock;
// jobs already blocked on them take any free slot first. Candidates then
// decide in order, higher priority first, then input order: a job is
// ready only when every one of its keys has its slots free (one, or its
// Slots) and an empty line, taking them of each; otherwise it blocks in the line of its
// first key (in key order) that has none (see package semaphore,
// multikey.go), or is discarded by the OnConflict or MaxBlocked of a key
// without one. It returns what the locks promoted.
func admit(ctx context.Context, ex Store, cands []*candidate, now time.Time) (driver.Promotion, error) {
	var keyed []*candidate
	for _, c := range cands {
		if len(c.keys) == 0 {
			c.outcome = driver.StateReady
			continue
		}
		keyed = append(keyed, c)
	}
	if len(keyed) == 0 {
		return driver.Promotion{}, nil
	}
	slices.SortStableFunc(keyed, func(a, b *candidate) int { return cmp.Compare(b.priority, a.priority) })
	// Each key is locked with the spec of its first candidate in that
	// order, all keys first, in key order (one round trip for the batch
	// where the driver is a driver.BatchLocker).
	first := map[string]*candidate{}
	var limits []driver.Limit
	for _, c := range keyed {
		for _, l := range c.keys {
			if first[l.Key] == nil {
				first[l.Key] = c
				limits = append(limits, l)
			}
		}
	}
	limits = driver.SortedKeys(limits)
	queues := make([]string, len(limits))
	for i, l := range limits {
		queues[i] = first[l.Key].queue
	}
	sems, err := semaphore.LockMany(ctx, ex, limits, queues, now)
	if err != nil {
		return driver.Promotion{}, err
	}
	set := semaphore.NewSet(ex, now)
	set.Hold(sems...)
	// Jobs already blocked on the keys take any free slot first.
	if err := set.PromoteBlocked(ctx, sems); err != nil {
		return driver.Promotion{}, err
	}
	promoted := set.Promoted()
	holders := map[string]*keyHolder{}
	for _, c := range keyed {
		if err := decide(ctx, ex, set, c, holders); err != nil {
			return promoted, err
		}
	}
	return promoted, set.Save(ctx)
}

// decide admits one keyed candidate against the locked semaphores; a
// discard names a holder of the key, read once per key (holders).
func decide(ctx context.Context, ex Store, set *semaphore.Set, c *candidate, holders map[string]*keyHolder) error {
	var full []driver.Limit // its keys without its slots to give now, in key order
	for _, l := range driver.SortedKeys(c.keys) {
		if sem := set.Get(l.Key); sem.Free() < c.slots || sem.Blocked() > 0 {
			full = append(full, l)
		}
	}
	if len(full) == 0 {
		for _, l := range c.keys {
			set.Get(l.Key).Wait(c.slots)
		}
		c.outcome = driver.StateReady
		return nil
	}
	holder := func(key string) (*keyHolder, error) {
		if holders[key] == nil {
			holders[key] = &keyHolder{key: key}
		}
		var err error
		c.heldBy, err = holders[key].read(ctx, ex)
		c.outcome = driver.StateDiscarded
		return holders[key], err
	}
	for _, l := range full {
		if l.OnConflict == driver.Discard {
			h, err := holder(l.Key)
			c.reason = fmt.Sprintf("concurrency key %q has no free slot (limit %d)%s and the job discards on conflict", l.Key, set.Get(l.Key).Limit(), h)
			return err
		}
	}
	line := set.Get(full[0].Key)
	if line.BacklogFull() {
		h, err := holder(full[0].Key)
		c.reason = fmt.Sprintf("concurrency key %q has no free slot%s and already has %d jobs waiting, its MaxBlocked", full[0].Key, h, line.MaxBlocked())
		return err
	}
	if c.waitTooLong(line, full[0].Key) {
		return nil
	}
	c.outcome = driver.StateBlocked
	if driver.HeadByHead(len(c.keys), c.slots) {
		line.BlockMulti()
		c.line = full[0].Key
	} else {
		line.Block(1)
	}
	return nil
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
	// Wait is a blocked job's expected wait (Wait.Expected zero when its
	// key's release interval is not known yet); a job MaxWait refused is
	// discarded with Wait.MaxWait set.
	Wait Wait
}

// Admit admits new jobs and keeps every one not discarded (a keyed or
// rated job's row goes in pending before admission and is deleted again
// if admission discards it). Jobs due
// later are stored scheduled and admitted when the dispatcher promotes
// them. A unique job that duplicates one already stored (or an earlier
// one of jobs) is neither admitted nor stored. It also returns what
// admission promoted of the jobs already blocked on the keys. A job with
// a rate key but no rate of its own whose queue's policy has none either
// is refused (ErrNoRate), and so is the whole batch.
func Admit(ctx context.Context, ex Store, jobs []*driver.NewJob, now time.Time) ([]Verdict, driver.Promotion, error) {
	if err := checkPolicyRates(ctx, ex, jobs); err != nil {
		return nil, driver.Promotion{}, err
	}
	dups, err := checkUnique(ctx, ex, jobs)
	if err != nil {
		return nil, driver.Promotion{}, err
	}
	waits, err := planWaits(ctx, ex, jobs)
	if err != nil {
		return nil, driver.Promotion{}, err
	}
	for i := range dups {
		delete(waits, i) // a duplicate is not stored: nothing waits
	}
	// The job rows of the jobs admission decides on go in first, pending:
	// the keys' locks are then held only while admission decides and
	// writes the execution rows, not while the job rows (most of the
	// batch's cost) are written, so producers over the same keys overlap.
	cands := make([]*candidate, len(jobs))
	var due []*candidate
	var store []*driver.NewJob
	for i, j := range jobs {
		if _, dup := dups[i]; dup {
			continue
		}
		c := newCandidate(i, &driver.Job{Limit: j.Limit, More: j.More, Slots: j.Slots, Rate: j.Rate, Queue: j.Queue, Priority: j.Priority}, driver.StateScheduled)
		c.fresh = !j.Replace && !j.CancelRunning
		cands[i] = c
		if w, ok := waits[i]; ok && (w.pending > 0 || w.failed != 0) {
			// Waiting for its dependencies, or cancelled by one:
			// storeWaits writes the rest once its row is in.
			j.State = driver.StatePending
			store = append(store, j)
			continue
		}
		switch {
		case j.ScheduledAt.After(now):
			j.State = driver.StateScheduled
		case len(c.keys) > 0 || c.rate.Key != "":
			j.State = driver.StatePending
			due = append(due, c)
		default:
			j.State = driver.StateReady
			due = append(due, c)
		}
		store = append(store, j)
	}
	if err := ex.JobInsertMany(ctx, now, store); err != nil {
		return nil, driver.Promotion{}, err
	}
	if waits != nil {
		states, err := storeWaits(ctx, ex, jobs, waits, now)
		if err != nil {
			return nil, driver.Promotion{}, err
		}
		for i, state := range states {
			cands[i].outcome = state
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
	var rows placement
	var discarded []int64
	for i, c := range cands {
		if c == nil {
			continue
		}
		results[i] = Verdict{State: c.outcome, Reason: c.reason, HeldBy: c.heldBy, Wait: c.wait}
		j := jobs[i]
		if j.State == driver.StatePending {
			if c.outcome == driver.StateDiscarded {
				discarded = append(discarded, j.ID) // a new job admission discards is not kept
				j.ID = 0
				continue
			}
			rows.place(c, j.ID, j.Queue, j.Priority, j.Limit.Key, now)
		}
		kept = append(kept, j)
	}
	if err := rows.write(ctx, ex); err != nil {
		return nil, promoted, err
	}
	if len(discarded) > 0 {
		if err := ex.JobDeleteMany(ctx, discarded); err != nil {
			return nil, promoted, err
		}
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

// placement gathers the execution rows of admitted jobs by the state
// admission gave them, written one statement a table.
type placement struct{ ready, blocked []driver.Execution }

// place adds the row of job id as c's outcome says: ready, or blocked in
// the line admission chose (its key's, when c.line is empty).
func (p *placement) place(c *candidate, id int64, queue string, priority int, key string, now time.Time) {
	row := driver.Execution{JobID: id, Queue: queue, Priority: priority, Key: cmp.Or(c.line, key), At: now}
	switch c.outcome {
	case driver.StateReady:
		p.ready = append(p.ready, row)
	case driver.StateBlocked:
		p.blocked = append(p.blocked, row)
	}
}

func (p *placement) write(ctx context.Context, ex Store) error {
	if err := ex.ExecutionInsertMany(ctx, driver.StateReady, p.ready); err != nil {
		return err
	}
	return ex.ExecutionInsertMany(ctx, driver.StateBlocked, p.blocked)
}
