package lifecycle

import (
	"context"
	"fmt"
	"slices"

	"github.com/bqueue/bq/internal/driver"
)

// duplicate is a new job found a duplicate before admission, so it never
// takes a slot or a place in a key's blocked line.
type duplicate struct {
	of    int64           // the existing job that makes it one; 0 when it is of an earlier item
	state driver.JobState // that job's state at the check
	item  int             // the earlier item of the same call, when of is 0
}

// checkUnique finds which of jobs are duplicates. It locks every unique
// key first, in sorted order (two enqueues of overlapping keys cannot
// deadlock), and only then looks each up: a key's lookup under its lock
// sees every job an earlier holder of the lock committed. Within one
// call the second job of a key is a duplicate of the first.
func checkUnique(ctx context.Context, ex Store, jobs []*driver.NewJob) (map[int]duplicate, error) {
	var keys []string
	for _, j := range jobs {
		if j.UniqueKey != "" && !slices.Contains(keys, j.UniqueKey) {
			keys = append(keys, j.UniqueKey)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := ex.UniqueLock(ctx, k); err != nil {
			return nil, fmt.Errorf("lock unique key %s: %w", k, err)
		}
	}
	dups := map[int]duplicate{}
	first := map[string]int{} // the item of each key this call inserts
	for i, j := range jobs {
		if j.UniqueKey == "" {
			continue
		}
		if f, ok := first[j.UniqueKey]; ok {
			dups[i] = duplicate{item: f}
			continue
		}
		id, state, ok, err := ex.UniqueGet(ctx, j.UniqueKey, j.UniqueStates)
		if err != nil {
			return nil, fmt.Errorf("look up unique key %s: %w", j.UniqueKey, err)
		}
		if ok {
			dups[i] = duplicate{of: id, state: state}
			continue
		}
		first[j.UniqueKey] = i
	}
	return dups, nil
}

// duplicateVerdict says what became of duplicate d once the call's other
// jobs are stored: a duplicate of an earlier item takes that item's id
// and state, and is discarded with it if admission discarded it.
func duplicateVerdict(d duplicate, jobs []*driver.NewJob, verdicts []Verdict) Verdict {
	if d.of != 0 {
		state := string(d.state)
		if state == "" {
			state = "committed after this transaction's snapshot"
		}
		return Verdict{State: d.state, Duplicate: true, DuplicateOf: d.of,
			Reason: fmt.Sprintf("duplicate of job %d (%s), which has the same unique key", d.of, state)}
	}
	first := verdicts[d.item]
	if first.State == driver.StateDiscarded {
		return Verdict{State: driver.StateDiscarded, HeldBy: first.HeldBy,
			Reason: fmt.Sprintf("duplicate of item %d of the same call, which was discarded: %s", d.item, first.Reason)}
	}
	id := jobs[d.item].ID
	return Verdict{State: first.State, Duplicate: true, DuplicateOf: id,
		Reason: fmt.Sprintf("duplicate of job %d (%s, item %d of the same call), which has the same unique key", id, first.State, d.item)}
}

// markUnique records the unique key of each stored job that has one.
func markUnique(ctx context.Context, ex Store, jobs []*driver.NewJob) error {
	for _, j := range jobs {
		if j.UniqueKey == "" {
			continue
		}
		if err := ex.UniqueSet(ctx, j.ID, j.UniqueKey); err != nil {
			return fmt.Errorf("record unique key of job %d: %w", j.ID, err)
		}
	}
	return nil
}
