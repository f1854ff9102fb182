package lifecycle

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/ratelimit"
	"github.com/bqueue/bq/internal/semaphore"
)

// AdaptStore is a Store that keeps adaptive limits.
type AdaptStore interface {
	Store
	driver.AdaptStore
}

// Adaptive is what of a job adapts (bq.Adaptive): the floors of its
// first key's limit (Key) and of its rate (Rate), 0 for what does not.
type Adaptive struct{ Key, Rate int }

// Any: something of the job adapts.
func (a Adaptive) Any() bool { return a.Key > 0 || a.Rate > 0 }

// Adapted is what a throttle did to its key's limit and to its rate.
type Adapted struct {
	Key      string
	From, To int // equal when the limit did not change
	// RateKey, RateFrom and RateTo are the same for its rate.
	RateKey          string
	RateFrom, RateTo int
}

// Throttle ends a run whose downstream pushed back (bq.Throttled): as
// Snooze, without counting the attempt, the job is scheduled at `at`.
// When its key adapts, its first key's limit is lowered
// (semaphore.Throttle) in the same transaction, before the slot is
// released, so the release promotes only what the lowered limit allows:
// floors.Key above 0 is its kind's bq.Adaptive Min; 0 leaves it to the
// policy of the job's queue (Policy.Adaptive), read under the key's lock
// (no policy, or one that does not adapt: nothing is lowered); below 0,
// the key does not adapt. When floors.Rate is above 0 (its rate adapts),
// its rate is lowered too (ratelimit.Throttle), after the release: rate
// rows are locked after every semaphore, as admission and the claim lock
// them.
func Throttle(ctx context.Context, ex AdaptStore, c *driver.Claim, floors Adaptive, at, now time.Time) (Result, Adapted, error) {
	key, rate := floors.Key >= 0 && c.Limit.Key != "", floors.Rate > 0 && c.Rate.Key != ""
	if !key && !rate {
		r, err := Snooze(ctx, ex, c, at, now)
		return r, Adapted{}, err
	}
	var ad Adapted
	var before func() error
	if key {
		ad.Key = c.Limit.Key
		before = func() (err error) {
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
			ad.From, ad.To, err = semaphore.Throttle(ctx, ex, c.Limit, c.Queue, floors.Key, driver.SlotsOf(c.Slots), c.ClaimedAt, now)
			return err
		}
	}
	r, err := snooze(ctx, ex, c, at, now, before)
	if ad.From == 0 {
		ad.Key = "" // the key does not adapt
	}
	if err != nil || !rate || !r.Matched || r.State != driver.StateScheduled {
		return r, ad, err
	}
	ad.RateKey = c.Rate.Key
	ad.RateFrom, ad.RateTo, err = ratelimit.Throttle(ctx, ex, c.Rate, c.Queue, floors.Rate, c.ClaimedAt, now)
	return r, ad, err
}

// RecoverMany counts the completions of claims whose results matched
// towards raising the limits that adapt of each (adaptive[i]: their
// kind's first key, semaphore.Recover, and rate, ratelimit.Recover), in
// the transaction that completed them: keys in sorted order (held
// already by the release), then rate keys in sorted order, after every
// semaphore. What a raise promoted is returned for waking.
func RecoverMany(ctx context.Context, ex AdaptStore, claims []*driver.Claim, adaptive []Adaptive, results []Result, now time.Time) (driver.Promotion, error) {
	keys, rates := tally{}, tally{}
	for i, c := range claims {
		if !results[i].Matched {
			continue
		}
		if adaptive[i].Key > 0 {
			keys.add(c.Limit.Key, c)
		}
		if adaptive[i].Rate > 0 {
			rates.add(c.Rate.Key, c)
		}
	}
	var out driver.Promotion
	err := keys.each(&out, func(c *driver.Claim, n int) (driver.Promotion, error) {
		return semaphore.Recover(ctx, ex, c.Limit, c.Queue, n, now)
	})
	if err != nil {
		return driver.Promotion{}, err
	}
	err = rates.each(&out, func(c *driver.Claim, n int) (driver.Promotion, error) {
		return ratelimit.Recover(ctx, ex, c.Rate, c.Queue, n, now)
	})
	if err != nil {
		return driver.Promotion{}, err
	}
	return out, nil
}

// tally counts completed claims by key, keeping each key's first.
type tally map[string]*counted

type counted struct {
	first *driver.Claim
	n     int
}

func (t tally) add(key string, c *driver.Claim) {
	if key == "" {
		return
	}
	if t[key] == nil {
		t[key] = &counted{first: c}
	}
	t[key].n++
}

// each calls recover with each key's first claim and count, keys in
// sorted order, adding what it promoted to out.
func (t tally) each(out *driver.Promotion, recover func(c *driver.Claim, n int) (driver.Promotion, error)) error {
	for _, k := range slices.Sorted(maps.Keys(t)) {
		p, err := recover(t[k].first, t[k].n)
		if err != nil {
			return err
		}
		out.Add(p)
	}
	return nil
}
