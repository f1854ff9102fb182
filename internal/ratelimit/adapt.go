package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// A rate that adapts (bq.Rate's Adaptive) follows its downstream as a
// concurrency key's adaptive limit does (package semaphore), with starts
// per period for slots: its lowered limit is the KeyAdapt row of its
// line key (driver.RateLine), changed under the key's row lock, and every
// Lock caps the resolved limit at it, so its ring shrinks on a throttle
// and grows back on recovery only:
//
//   - decrease (Throttle): limit = max(Min, min(limit-1, ⌈limit*3/4⌉)),
//     once per change: a throttle of a run claimed before the rate's last
//     change answered to the older limit and changes nothing;
//   - recovery (Recover): +1 once the key's jobs have completed as many
//     runs as its limit since its last change, up to its resolved limit
//     (its override, its jobs' Rate or their policy's), where the row goes.

// AdaptStore is a Store that keeps adaptive limits.
type AdaptStore interface {
	Store
	driver.AdaptStore
}

// Throttle lowers the rate of spec.Key as a job of queue, claimed at
// claimedAt, was throttled; floor is the fewest starts per period the
// rate may fall to (bq.Adaptive's Min). It reports the limit before and
// after (equal when nothing changed); a key with no rate at all (see
// Lock) changes nothing.
func Throttle(ctx context.Context, ex AdaptStore, spec driver.RateSpec, queue string, floor int, claimedAt, now time.Time) (from, to int, err error) {
	if floor < 1 {
		return 0, 0, fmt.Errorf("throttle rate key %q: adaptive minimum %d: want 1 or more", spec.Key, floor)
	}
	w, err := Lock(ctx, ex, spec, queue, now)
	if err != nil || w == nil {
		return 0, 0, err
	}
	// Every path saves: Lock may have resized the ring to a changed
	// resolved limit, which the row must say.
	from = w.row.Limit
	if to, err = driver.AdaptThrottle(ctx, ex, driver.RateLine(spec.Key), from, w.top, floor, claimedAt, now); err != nil {
		return 0, 0, err
	}
	if to != from {
		if err := w.resize(ctx, to, w.row.Period); err != nil {
			return 0, 0, err
		}
	}
	return from, to, w.Save(ctx)
}

// Recover counts n completed jobs of spec.Key (queue theirs) towards its
// lowered rate's next raise: once as many have completed as its limit
// since its last change, the limit rises by one, up to the resolved one,
// and the key's line takes the new slot at once. A rate not lowered
// costs one read and changes nothing.
func Recover(ctx context.Context, ex AdaptStore, spec driver.RateSpec, queue string, n int, now time.Time) (driver.Promotion, error) {
	line := driver.RateLine(spec.Key)
	if _, ok, err := ex.KeyAdaptGet(ctx, line); err != nil || !ok {
		return driver.Promotion{}, err
	}
	w, err := Lock(ctx, ex, spec, queue, now)
	if err != nil || w == nil {
		return driver.Promotion{}, err
	}
	raised, err := driver.AdaptRecover(ctx, ex, line, w.top, n, now) // again, under the key's lock
	if err != nil {
		return driver.Promotion{}, err
	}
	if raised == 0 {
		// Not yet; or its row went meanwhile, with the raise that took
		// it to the top, which promoted the line.
		return driver.Promotion{}, w.Save(ctx)
	}
	if err := w.resize(ctx, raised, w.row.Period); err != nil {
		return driver.Promotion{}, err
	}
	if err := w.PromoteLine(ctx); err != nil {
		return driver.Promotion{}, err
	}
	return w.Promoted(), w.Save(ctx)
}
