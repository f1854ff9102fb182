package sqlite

import (
	"context"

	"github.com/bqueue/bq/internal/driver"
)

// The reads of the set-wise promotion of mixed lines go key by key on
// SQLite: with no round trip to save, a statement prepared once per
// connection beats one whose text (its number of branches) changes with
// every batch and is parsed anew each time (a third of a keyed drain's
// CPU with a second key per job, measured).

func (e executor) LineHeadsMany(ctx context.Context, keys []string, ns []int) ([][]driver.LineHead, error) {
	out := make([][]driver.LineHead, len(keys))
	for i, k := range keys {
		if ns[i] <= 0 {
			continue
		}
		var err error
		if out[i], err = e.LineHeads(ctx, k, ns[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SemaphoreTryLockMany reads each key: the write transaction is the lock.
func (e executor) SemaphoreTryLockMany(ctx context.Context, keys []string) ([]driver.Semaphore, error) {
	var out []driver.Semaphore
	for _, k := range keys {
		s, ok, err := e.SemaphoreLock(ctx, k, "")
		if err != nil {
			return nil, err
		}
		if ok {
			s.Override, s.Policy = 0, driver.Policy{}
			out = append(out, s)
		}
	}
	return out, nil
}
