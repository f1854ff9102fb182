package semaphore

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Adaptive limits: a key whose downstream pushes back (a job returns
// bq.Throttled) runs at a lower limit, fleet-wide, stored in its
// KeyAdapt row beside its semaphore and changed with it, under its lock,
// so the semaphore's free value stays its limit minus its holders:
//
//   - decrease (Throttle): limit = max(Min, min(limit-1, ⌈limit*3/4⌉)),
//     once per change: a throttle of a run claimed before the key's last
//     change answers to the older limit and changes nothing;
//   - recovery (Recover): +1 once the key has completed as many jobs as
//     its limit since its last change, up to its own limit (its
//     override, its jobs' To or their policy's), where its row goes.
//
// A lowered limit below the key's holders leaves its free value at 0 or
// below: nothing is admitted until enough of them finish.

// Adapted is limit capped at the key's adaptive limit adapt (0: none).
func Adapted(limit, adapt int) int {
	if adapt > 0 {
		return min(limit, adapt)
	}
	return limit
}

// Lowered is the limit a throttle takes cur to, never below floor.
func Lowered(cur, floor int) int {
	return max(floor, min(cur-1, (cur*3+3)/4), 1)
}

// AdaptStore is what adapting a key's limit reads and writes.
type AdaptStore interface {
	driver.SemaphoreStore
	driver.AdaptStore
}

// Throttle lowers the limit of l's key (see Adapted) as a job of queue
// that held one of its slots, claimed at claimedAt, was throttled; floor
// is the lowest the limit may go (bq.Adaptive's Min). Call it before the
// job's slot is released, in the same transaction, so the release
// promotes only what the lowered limit allows. It reports the limit
// before and after (equal when nothing changed).
func Throttle(ctx context.Context, ex AdaptStore, l driver.Limit, queue string, floor int, claimedAt, now time.Time) (from, to int, err error) {
	if floor < 1 {
		return 0, 0, fmt.Errorf("throttle key %q: adaptive minimum %d: want 1 or more", l.Key, floor)
	}
	l.Duration = cmp.Or(l.Duration, DefaultDuration)
	s, err := lock(ctx, ex, l, queue, now)
	if err != nil {
		return 0, 0, err
	}
	a, ok, err := ex.KeyAdaptGet(ctx, l.Key)
	if err != nil {
		return 0, 0, err
	}
	from = s.row.Limit
	if ok && claimedAt.Before(a.AdaptedAt) {
		return from, from, nil // run under an older limit
	}
	top := Limit(l, s.row.Override, s.row.Policy)
	to = min(top, Lowered(from, floor))
	if to >= top {
		// At its own limit (a floor at or above it): nothing to adapt.
		if ok {
			_, err = ex.KeyAdaptDelete(ctx, l.Key)
		}
		return from, from, err
	}
	if err := ex.KeyAdaptSet(ctx, driver.KeyAdapt{Key: l.Key, Limit: to, Min: floor, AdaptedAt: now}); err != nil {
		return 0, 0, err
	}
	if to == from {
		return from, to, nil
	}
	s.setLimit(to)
	return from, to, s.Save(ctx)
}

// Recover counts n completed jobs of l's key (queue theirs) towards its
// adaptive limit's next raise: once the key has completed as many jobs as
// its limit since its last change, the limit rises by one, up to its own,
// and blocked jobs take the slot at once, as for a raised SetKeyLimit. A
// key not lowered costs one read and changes nothing.
func Recover(ctx context.Context, ex AdaptStore, l driver.Limit, queue string, n int, now time.Time) (driver.Promotion, error) {
	if _, ok, err := ex.KeyAdaptGet(ctx, l.Key); err != nil || !ok {
		return driver.Promotion{}, err
	}
	l.Duration = cmp.Or(l.Duration, DefaultDuration)
	s, err := lock(ctx, ex, l, queue, now)
	if err != nil {
		return driver.Promotion{}, err
	}
	a, ok, err := ex.KeyAdaptGet(ctx, l.Key) // again, under the key's lock
	if err != nil || !ok {
		return driver.Promotion{}, err
	}
	top := Limit(l, s.row.Override, s.row.Policy)
	a.Successes += n
	if a.Successes < a.Limit && a.Limit < top {
		return driver.Promotion{}, ex.KeyAdaptSet(ctx, a)
	}
	a.Limit, a.Successes, a.AdaptedAt = min(a.Limit+1, top), 0, now
	if a.Limit >= top {
		if _, err := ex.KeyAdaptDelete(ctx, l.Key); err != nil {
			return driver.Promotion{}, err
		}
	} else if err := ex.KeyAdaptSet(ctx, a); err != nil {
		return driver.Promotion{}, err
	}
	s.setLimit(min(a.Limit, top))
	set := NewSet(ex, now)
	set.add(s)
	if err := s.PromoteBlocked(ctx); err != nil {
		return driver.Promotion{}, err
	}
	return set.Promoted(), set.Save(ctx)
}
