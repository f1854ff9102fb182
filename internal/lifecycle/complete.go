package lifecycle

// Completions in batches (the completer's): one statement ends every
// claim of the batch whose fence still matches, then each key gets its
// finished holders' slots back.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/semaphore"
)

// ErrMismatch is CompleteMany's error when it presumed that every claim
// still matched and one did not: the caller rolls the transaction back
// and records the batch again without presuming.
var ErrMismatch = errors.New("a claim of the batch no longer matched its run: record the batch again without presuming")

// CompleteMany records many successful runs in one go: one statement ends
// every claim whose fence still matches, then each key's semaphore gets
// back its finished holders' slots (each holder's Slots), keys in sorted
// order. Results follow claims; a claim that no longer matched changed
// nothing.
//
// With presume, on a store that can (driver.CompleteReleaser), the end of
// the claims and the release go in one round trip, the release counting
// every claim; should one not have matched (its run was reaped or
// re-claimed meanwhile, rare), CompleteMany returns ErrMismatch and the
// transaction, already wrong, must be rolled back.
func CompleteMany(ctx context.Context, ex Store, claims []*driver.Claim, keep, presume bool, now time.Time) ([]Result, error) {
	if cr, ok := ex.(driver.CompleteReleaser); ok && presume {
		keys, counts, first := heldSlots(claims, func(*driver.Claim) bool { return true })
		if len(keys) > 0 {
			return completePresumed(ctx, ex, cr, claims, keep, keys, counts, first, now)
		}
	}
	matched, err := ex.ClaimCompleteMany(ctx, claims, keep, now)
	if err != nil {
		return nil, err
	}
	// By job and fence: a stale claim of a job may share the batch with
	// the job's live claim, and only the live one releases.
	done := make(map[driver.Fenced]driver.Ended, len(matched))
	for _, f := range matched {
		done[f.Fenced] = f
	}
	results := make([]Result, len(claims))
	keys, counts, first := heldSlots(claims, func(c *driver.Claim) bool {
		_, ok := done[driver.Fenced{JobID: c.ID, Fence: c.Fence}]
		return ok
	})
	for i, c := range claims {
		if f, ok := done[driver.Fenced{JobID: c.ID, Fence: c.Fence}]; ok {
			results[i] = Result{Matched: true, State: driver.StateCompleted, HasDependents: f.HasDependents}
		}
	}
	promoted, err := semaphore.ReleaseMany(ctx, ex, keys, counts, now)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		results[first[k]].Promoted.Add(promoted[i])
	}
	return results, nil
}

// completePresumed is CompleteMany's one round trip, every claim
// presumed to match.
func completePresumed(ctx context.Context, ex Store, cr driver.CompleteReleaser, claims []*driver.Claim, keep bool,
	keys []string, counts []int, first map[string]int, now time.Time) ([]Result, error) {
	matched, out, err := cr.ClaimCompleteRelease(ctx, claims, keep, keys, counts, now)
	if err != nil {
		return nil, err
	}
	if len(matched) != len(claims) {
		return nil, ErrMismatch
	}
	byClaim := make(map[driver.Fenced]int, len(claims))
	for i, c := range claims {
		byClaim[driver.Fenced{JobID: c.ID, Fence: c.Fence}] = i
	}
	results := make([]Result, len(claims))
	for _, f := range matched {
		i, ok := byClaim[f.Fenced]
		if !ok || results[i].Matched {
			return nil, ErrMismatch
		}
		results[i] = Result{Matched: true, State: driver.StateCompleted, HasDependents: f.HasDependents}
	}
	promoted, err := semaphore.PromoteLeft(ctx, ex, keys, out, now)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		results[first[k]].Promoted.Add(promoted[i])
	}
	return results, nil
}

// heldSlots sums the slots the claims that ended hold of each key: the keys,
// sorted, their counts, and the index of each key's first ended claim.
func heldSlots(claims []*driver.Claim, ended func(*driver.Claim) bool) (keys []string, counts []int, first map[string]int) {
	first = map[string]int{}
	count := map[string]int{}
	for i, c := range claims {
		if !ended(c) {
			continue
		}
		for _, l := range c.Keys() {
			if _, ok := first[l.Key]; !ok {
				first[l.Key] = i
			}
			count[l.Key] += driver.SlotsOf(c.Slots)
		}
	}
	keys = make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	counts = make([]int, len(keys))
	for i, k := range keys {
		counts[i] = count[k]
	}
	return keys, counts, first
}
