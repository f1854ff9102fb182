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

// AdaptStore is what adapting a key's limit reads and writes.
type AdaptStore interface {
	driver.SemaphoreStore
	driver.AdaptStore
}

// Throttle lowers the limit of l's key (see Adapted) as a job of queue
// that held one of its slots, claimed at claimedAt, was throttled; floor
// is the lowest the limit may go (bq.Adaptive's Min). Call it before the
// job's slot is released, in the same transaction, so the release
// promotes only what the lowered limit allows. floor 0 is the Adaptive
// Min of queue's policy, read with the lock, never below slots (the
// throttled job's Slots, which Define keeps at most a kind's own Min):
// a job of several slots must still fit under the lowered limit, or no
// completion would ever raise it. A queue whose policy does not adapt
// changes nothing and reports 0, 0. It reports the limit before and
// after (equal when nothing changed).
func Throttle(ctx context.Context, ex AdaptStore, l driver.Limit, queue string, floor, slots int, claimedAt, now time.Time) (from, to int, err error) {
	if floor < 0 {
		return 0, 0, fmt.Errorf("throttle key %q: adaptive minimum %d: want 1 or more, or 0 for its queue policy's", l.Key, floor)
	}
	l.Duration = cmp.Or(l.Duration, DefaultDuration)
	s, err := lock(ctx, ex, l, queue, now)
	if err != nil {
		return 0, 0, err
	}
	from = s.row.Limit
	if floor == 0 {
		if floor = s.row.Policy.AdaptiveMin; floor < 1 {
			return 0, 0, nil // neither its kind nor its queue adapts
		}
		floor = max(floor, slots)
	}
	to, err = driver.AdaptThrottle(ctx, ex, l.Key, from, Limit(l, s.row.Override, s.row.Policy), floor, claimedAt, now)
	if err != nil {
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
	raised, err := driver.AdaptRecover(ctx, ex, l.Key, Limit(l, s.row.Override, s.row.Policy), n, now) // under the key's lock
	if err != nil || raised == 0 {
		return driver.Promotion{}, err
	}
	s.setLimit(raised)
	set := NewSet(ex, now)
	set.add(s)
	if err := s.PromoteBlocked(ctx); err != nil {
		return driver.Promotion{}, err
	}
	return set.Promoted(), set.Save(ctx)
}
