package lifecycle

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/semaphore"
)

// AdaptStore is a Store that keeps adaptive limits.
type AdaptStore interface {
	Store
	driver.AdaptStore
}

// Adapted is what a throttle did to its key's limit.
type Adapted struct {
	Key      string
	From, To int // equal when the limit did not change
}

// Throttle ends a run whose downstream pushed back (bq.Throttled): as
// Snooze, without counting the attempt, the job is scheduled at `at`.
// When floor is above 0 (the job's key adapts, bq.Adaptive), its first
// key's limit is lowered (semaphore.Throttle) in the same transaction,
// before the slot is released, so the release promotes only what the
// lowered limit allows.
func Throttle(ctx context.Context, ex AdaptStore, c *driver.Claim, floor int, at, now time.Time) (Result, Adapted, error) {
	if floor <= 0 || c.Limit.Key == "" {
		r, err := Snooze(ctx, ex, c, at, now)
		return r, Adapted{}, err
	}
	ad := Adapted{Key: c.Limit.Key}
	r, err := snooze(ctx, ex, c, at, now, func() (err error) {
		// The job's keys are locked in sorted order, as the release
		// locks them: those before its first key now.
		for _, k := range keyNames(c.Keys()) {
			if k >= c.Limit.Key {
				break
			}
			if _, _, err := ex.SemaphoreLock(ctx, k, ""); err != nil {
				return err
			}
		}
		ad.From, ad.To, err = semaphore.Throttle(ctx, ex, c.Limit, c.Queue, floor, c.ClaimedAt, now)
		return err
	})
	return r, ad, err
}

// RecoverMany counts the completions of claims whose results matched
// and whose adaptive[i] is set (their kind's key adapts, bq.Adaptive)
// towards raising their first keys' limits (semaphore.Recover), in the
// transaction that completed them, keys in sorted order (held already by
// the release). What a raise promoted is returned for waking.
func RecoverMany(ctx context.Context, ex AdaptStore, claims []*driver.Claim, adaptive []bool, results []Result, now time.Time) (driver.Promotion, error) {
	count := map[string]int{}
	first := map[string]*driver.Claim{}
	for i, c := range claims {
		if !adaptive[i] || !results[i].Matched || c.Limit.Key == "" {
			continue
		}
		if count[c.Limit.Key]++; first[c.Limit.Key] == nil {
			first[c.Limit.Key] = c
		}
	}
	var out driver.Promotion
	for _, k := range slices.Sorted(maps.Keys(count)) {
		c := first[k]
		p, err := semaphore.Recover(ctx, ex, c.Limit, c.Queue, count[k], now)
		if err != nil {
			return driver.Promotion{}, err
		}
		out.Add(p)
	}
	return out, nil
}
