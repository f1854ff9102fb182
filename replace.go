package bq

import (
	"fmt"
	"slices"

	"github.com/bqueue/bq/internal/driver"
)

// replaces reports whether a job whose limits are first and more replaces
// its key's queued jobs (OnConflict Replace), storing first as Block (the
// job waits its turn as Block does once admitted), and refuses Replace on
// a job of several keys or one due later.
func replaces(first *driver.Limit, more []driver.Limit, later bool) (bool, error) {
	isReplace := func(l driver.Limit) bool { return l.OnConflict == driver.OnConflict(Replace) }
	if !isReplace(*first) && !slices.ContainsFunc(more, isReplace) {
		return false, nil
	}
	if len(more) > 0 {
		return false, fmt.Errorf("%w: %s", ErrInvalidJob, replaceOneKey)
	}
	if later {
		return false, fmt.Errorf("%w: OnConflict bq.Replace with bq.At or bq.In: a job replaces its key's queued jobs when it is enqueued, so it must be due now; drop At/In, or use bq.Block", ErrInvalidJob)
	}
	first.OnConflict = driver.Block
	return first.Key != "", nil
}

// checkReplaces refuses a batch in which a replacing job shares its key
// with another job of the batch: the replace cancels the key's queued
// jobs before the batch is admitted, so it would not see the other.
func checkReplaces(jobs []*driver.NewJob) error {
	holders := map[string]int{}
	for _, j := range jobs {
		for _, l := range j.Keys() {
			holders[l.Key]++
		}
	}
	for _, j := range jobs {
		if j.Replace && holders[j.Limit.Key] > 1 {
			return fmt.Errorf("%w: a job replacing on key %q shares the key with another job of this enqueue, which it would not replace: enqueue the replacing job on its own (and only the newest)", ErrInvalidJob, j.Limit.Key)
		}
	}
	return nil
}
