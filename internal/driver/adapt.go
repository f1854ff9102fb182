package driver

import (
	"context"
	"time"
)

// KeyAdapt is the adaptive limit of a throttled key (bq.Adaptive): the
// limit it runs at now, lowered by throttles and raised back by
// successes, never below Min nor above the key's own limit (its
// override, its jobs' To or their policy's MaxActivePerKey). A key with no
// row runs at its own limit. A rate key's (bq.Rate's Adaptive) is the
// row of RateLine(key): its Limit caps the starts per period.
type KeyAdapt struct {
	Key   string
	Limit int
	Min   int
	// Successes counts the key's completions since its last change,
	// towards the next raise.
	Successes int
	AdaptedAt time.Time
}

// Adapted is limit capped at the adaptive limit adapt (0: none).
func Adapted(limit, adapt int) int {
	if adapt > 0 {
		return min(limit, adapt)
	}
	return limit
}

// Lowered is the limit a throttle takes cur to, never below floor: a
// multiplicative decrease by a quarter, by one at least. A concurrency
// key's limit and a rate's starts per period fall alike.
func Lowered(cur, floor int) int {
	return max(floor, min(cur-1, (cur*3+3)/4), 1)
}

// AdaptThrottle is the one decrease rule of a limit that adapts (a
// concurrency key's, or a rate's under its RateLine key), applied to its
// KeyAdapt row under the caller's lock: the limit, at from under its own
// top, falls to Lowered(from, floor), once per change (a run claimed
// before the row's last change answered to the older limit: nothing
// changes); at or above top the row goes. It returns the limit after,
// from when nothing changed; the caller applies it to its semaphore or
// ring.
func AdaptThrottle(ctx context.Context, ex AdaptStore, key string, from, top, floor int, claimedAt, now time.Time) (to int, err error) {
	a, ok, err := ex.KeyAdaptGet(ctx, key)
	if err != nil {
		return 0, err
	}
	if ok && claimedAt.Before(a.AdaptedAt) {
		return from, nil // run under an older limit
	}
	to = min(top, Lowered(from, floor))
	if to >= top {
		// At its own limit (a floor at or above it): nothing to adapt.
		if ok {
			_, err = ex.KeyAdaptDelete(ctx, key)
		}
		return from, err
	}
	return to, ex.KeyAdaptSet(ctx, KeyAdapt{Key: key, Limit: to, Min: floor, AdaptedAt: now})
}

// AdaptRecover is the one recovery rule, under the caller's lock: n
// completions count towards the row's next raise; once as many have
// completed as its limit since its last change, the limit rises by one
// up to top, where the row goes. It returns the raised limit, 0 while it
// does not rise (or the key has no row).
func AdaptRecover(ctx context.Context, ex AdaptStore, key string, top, n int, now time.Time) (raised int, err error) {
	a, ok, err := ex.KeyAdaptGet(ctx, key)
	if err != nil || !ok {
		return 0, err
	}
	a.Successes += n
	if a.Successes < a.Limit && a.Limit < top {
		return 0, ex.KeyAdaptSet(ctx, a)
	}
	a.Limit, a.Successes, a.AdaptedAt = min(a.Limit+1, top), 0, now
	if a.Limit >= top {
		_, err = ex.KeyAdaptDelete(ctx, key)
	} else {
		err = ex.KeyAdaptSet(ctx, a)
	}
	return a.Limit, err
}

// AdaptStore keeps the keys' adaptive limits. Callers hold the key's
// semaphore lock (a rate key's row lock, for its RateLine row), so a
// key's row changes with its semaphore's limit (its ring), in one
// transaction.
type AdaptStore interface {
	// KeyAdaptGet reads key's adaptive limit; ok is false when it has none.
	KeyAdaptGet(ctx context.Context, key string) (a KeyAdapt, ok bool, err error)
	// KeyAdaptSet stores (or replaces) a key's adaptive limit.
	KeyAdaptSet(ctx context.Context, a KeyAdapt) error
	// KeyAdaptDelete removes key's adaptive limit; false when it had none.
	KeyAdaptDelete(ctx context.Context, key string) (bool, error)
	// KeyAdaptList returns up to max adaptive limits, ordered by key.
	KeyAdaptList(ctx context.Context, max int) ([]KeyAdapt, error)
}
