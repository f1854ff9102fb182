package lifecycle_test

import (
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/lifecycle"
)

// TestThrottleLowersTheLimitBeforeTheSlotPasses: a throttled run of a To
// 2 key, one other holder and two jobs blocked, lowers the limit to 1 in
// its transaction: its slot goes back, but no blocked job is promoted
// (the lowered limit is full), and the attempt is not spent. The other
// holder's completion passes its slot to the first blocked job and
// raises the limit back to 2 (one completion at limit 1), and the
// second blocked job takes the new slot.
func TestThrottleLowersTheLimitBeforeTheSlotPasses(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 2, driver.Block, 0), job("k", 2, driver.Block, 0), job("k", 2, driver.Block, 0), job("k", 2, driver.Block, 0))
	c := claim(t, s)
	later := now.Add(time.Minute)
	r, ad, err := lifecycle.Throttle(ctx, s, c, 1, later, now.Add(time.Second))
	if err != nil || !r.Matched || r.State != driver.StateScheduled || r.Promoted.Jobs != 0 {
		t.Fatalf("throttle: %+v %v, want scheduled, nothing promoted", r, err)
	}
	if ad.Key != "k" || ad.From != 2 || ad.To != 1 {
		t.Errorf("throttle adapted %+v, want k from 2 to 1", ad)
	}
	if got := s.Jobs[c.ID]; got.State != driver.StateScheduled || got.Attempt != 0 || !got.ScheduledAt.Equal(later) {
		t.Errorf("throttled job %s attempt %d at %s, want scheduled at %s, attempt 0", got.State, got.Attempt, got.ScheduledAt, later)
	}
	if sem := s.Semaphores["k"]; sem.Limit != 1 || sem.Value != 0 || sem.Blocked != 2 {
		t.Errorf("semaphore %+v, want limit 1, 0 free, 2 blocked", *sem)
	}
	honest(t, s, "k")

	other := claim(t, s)
	claims := []*driver.Claim{other}
	results, err := lifecycle.CompleteMany(ctx, s, claims, true, now.Add(2*time.Second))
	if err != nil || !results[0].Matched || results[0].Promoted.Jobs != 1 {
		t.Fatalf("complete the other holder: %+v %v, want matched, its slot passed to a blocked job", results, err)
	}
	p, err := lifecycle.RecoverMany(ctx, s, claims, []bool{true}, results, now.Add(2*time.Second))
	if err != nil || p.Jobs != 1 {
		t.Fatalf("recover: %+v %v, want the limit back at 2 and the blocked job promoted", p, err)
	}
	if sem := s.Semaphores["k"]; sem.Limit != 2 || sem.Blocked != 0 {
		t.Errorf("semaphore %+v, want limit 2 and nothing blocked", *sem)
	}
	if _, ok := s.Adapts["k"]; ok {
		t.Errorf("the adaptive row stayed at the key's own limit")
	}
	honest(t, s, "k")
}

// TestThrottleOfAKeyThatDoesNotAdaptIsASnooze: with no floor (the kind
// sets no Adaptive), a throttle is a snooze: the slot passes on and no
// limit changes.
func TestThrottleOfAKeyThatDoesNotAdaptIsASnooze(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 0))
	c := claim(t, s)
	r, ad, err := lifecycle.Throttle(ctx, s, c, 0, now.Add(time.Minute), now)
	if err != nil || r.State != driver.StateScheduled || r.Promoted.Jobs != 1 || ad != (lifecycle.Adapted{}) {
		t.Fatalf("throttle without a floor: %+v %+v %v, want a snooze passing the slot on", r, ad, err)
	}
	if len(s.Adapts) != 0 || s.Semaphores["k"].Limit != 1 {
		t.Errorf("a key that does not adapt changed: %+v, limit %d", s.Adapts, s.Semaphores["k"].Limit)
	}
	honest(t, s, "k")
}
