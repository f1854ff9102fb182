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
	r, ad, err := lifecycle.Throttle(ctx, s, c, lifecycle.Adaptive{Key: 1}, later, now.Add(time.Second))
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
	results, err := lifecycle.CompleteMany(ctx, s, claims, true, false, now.Add(2*time.Second))
	if err != nil || !results[0].Matched || results[0].Promoted.Jobs != 1 {
		t.Fatalf("complete the other holder: %+v %v, want matched, its slot passed to a blocked job", results, err)
	}
	p, err := lifecycle.RecoverMany(ctx, s, claims, []lifecycle.Adaptive{{Key: 1}}, results, now.Add(2*time.Second))
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
	r, ad, err := lifecycle.Throttle(ctx, s, c, lifecycle.Adaptive{}, now.Add(time.Minute), now)
	if err != nil || r.State != driver.StateScheduled || r.Promoted.Jobs != 1 || ad != (lifecycle.Adapted{}) {
		t.Fatalf("throttle without a floor: %+v %+v %v, want a snooze passing the slot on", r, ad, err)
	}
	if len(s.Adapts) != 0 || s.Semaphores["k"].Limit != 1 {
		t.Errorf("a key that does not adapt changed: %+v, limit %d", s.Adapts, s.Semaphores["k"].Limit)
	}
	honest(t, s, "k")
}

// TestThrottleLowersTheRateAndCompletionsRaiseIt: a rate of 4 per hour
// that adapts (floor 2), its four starts taken and four jobs in line: a
// throttle lowers it to 3 (the ring shrinks to 3, the adaptive row of its
// line key says 3) and spends no attempt; a throttle of a run claimed
// before that change changes nothing; a start's Lock at the rate's own 4
// keeps the ring at 3; a run claimed after the change lowers it to 2.
// Completions then raise it by one per limit of them (2, then 3), the
// raise giving the line its new slot at once, and the row goes at 4.
func TestThrottleLowersTheRateAndCompletionsRaiseIt(t *testing.T) {
	s := memstore.New()
	spec := driver.RateSpec{Key: "g/k", Limit: 4, Period: time.Hour}
	if _, _, err := lifecycle.Admit(ctx, s, rated(8, spec.Key, spec.Limit, spec.Period), rateNow); err != nil {
		t.Fatal(err)
	}
	claims := claimAll(t, s, rateNow)
	if _, _, err := lifecycle.StartRated(ctx, s, claims, func() time.Time { return rateNow }, 0); err != nil || len(claims) != 4 {
		t.Fatalf("start %d claims: %v; want 4", len(claims), err)
	}
	floors := lifecycle.Adaptive{Rate: 2}
	throttle := func(c *driver.Claim, at time.Time) lifecycle.Adapted {
		t.Helper()
		r, ad, err := lifecycle.Throttle(ctx, s, c, floors, at.Add(time.Minute), at)
		if err != nil || !r.Matched || r.State != driver.StateScheduled {
			t.Fatalf("throttle job %d: %+v %v, want it scheduled", c.ID, r, err)
		}
		if got := s.Jobs[c.ID]; got.Attempt != 0 {
			t.Errorf("throttled job %d spent an attempt (%d)", c.ID, got.Attempt)
		}
		return ad
	}
	limit := func() (ring, adapt int) { return len(s.Rings[spec.Key]), s.Adapts[driver.RateLine(spec.Key)].Limit }
	if ad := throttle(claims[0], rateNow.Add(time.Second)); ad.RateKey != spec.Key || ad.RateFrom != 4 || ad.RateTo != 3 || ad.Key != "" {
		t.Errorf("first throttle adapted %+v, want the rate from 4 to 3, no key", ad)
	}
	if ring, adapt := limit(); ring != 3 || adapt != 3 {
		t.Errorf("after the first throttle: ring %d, adaptive limit %d; want 3, 3", ring, adapt)
	}
	if ad := throttle(claims[1], rateNow.Add(2*time.Second)); ad.RateFrom != 3 || ad.RateTo != 3 {
		t.Errorf("a throttle of a run claimed before the change adapted %+v, want nothing (3 to 3)", ad)
	}
	if _, err := lifecycle.ApplyRate(ctx, s, spec, rateNow.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if ring, _ := limit(); ring != 3 {
		t.Errorf("a Lock at the rate's own limit resized the ring to %d, want it kept at 3", ring)
	}
	claims[2].ClaimedAt = rateNow.Add(4 * time.Second)
	if ad := throttle(claims[2], rateNow.Add(5*time.Second)); ad.RateFrom != 3 || ad.RateTo != 2 {
		t.Errorf("a throttle of a run claimed after the change adapted %+v, want 3 to 2", ad)
	}
	recover := func(n int, at time.Time) driver.Promotion {
		t.Helper()
		done := make([]*driver.Claim, n)
		results := make([]lifecycle.Result, n)
		adaptive := make([]lifecycle.Adaptive, n)
		for i := range done {
			done[i], results[i], adaptive[i] = claims[3], lifecycle.Result{Matched: true}, floors
		}
		p, err := lifecycle.RecoverMany(ctx, s, done, adaptive, results, at)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	later := rateNow.Add(2 * time.Hour) // every start a period old: the new slots are free
	if p := recover(1, later); p.Jobs != 0 {
		t.Errorf("one completion at limit 2 promoted %d jobs; want none before the raise", p.Jobs)
	}
	if ring, adapt := limit(); ring != 2 || adapt != 2 || s.Adapts[driver.RateLine(spec.Key)].Successes != 1 {
		t.Errorf("after one completion: ring %d, adaptive %+v; want 2 with 1 counted", ring, s.Adapts[driver.RateLine(spec.Key)])
	}
	recover(1, later)
	if ring, adapt := limit(); ring != 3 || adapt != 3 {
		t.Errorf("after two completions at limit 2: ring %d, adaptive limit %d; want 3, 3", ring, adapt)
	}
	if p := recover(3, later); p.Jobs == 0 {
		t.Errorf("the raise to 4 promoted nothing from the line (%d waiting)", s.Rates[spec.Key].Waiting)
	}
	if ring, _ := limit(); ring != 4 {
		t.Errorf("ring %d after the last raise, want 4", ring)
	}
	if _, ok := s.Adapts[driver.RateLine(spec.Key)]; ok {
		t.Errorf("the adaptive row stayed at the rate's own limit")
	}
}

// TestThrottleLowersBothTheKeyAndTheRate: a job whose concurrency key
// (To 4) and rate (4 per hour) both adapt lowers both in one throttle,
// the key's before its slot passes and the rate's after; three
// completions (as many as the lowered limits) then raise both back.
func TestThrottleLowersBothTheKeyAndTheRate(t *testing.T) {
	s := memstore.New()
	jobs := make([]*driver.NewJob, 4)
	for i := range jobs {
		jobs[i] = job("k", 4, driver.Block, 0)
		jobs[i].Rate = driver.RateSpec{Key: "g/r", Limit: 4, Period: time.Hour}
	}
	enqueue(t, s, jobs...)
	claims := claimAll(t, s, now)
	if _, _, err := lifecycle.StartRated(ctx, s, claims, func() time.Time { return now }, 0); err != nil || len(claims) != 4 {
		t.Fatalf("start %d claims: %v; want 4", len(claims), err)
	}
	both := lifecycle.Adaptive{Key: 1, Rate: 1}
	_, ad, err := lifecycle.Throttle(ctx, s, claims[0], both, now.Add(time.Minute), now.Add(time.Second))
	if err != nil || ad.From != 4 || ad.To != 3 || ad.RateFrom != 4 || ad.RateTo != 3 {
		t.Fatalf("throttle: %+v %v; want the key and the rate from 4 to 3", ad, err)
	}
	if sem, ring := s.Semaphores["k"], s.Rings["g/r"]; sem.Limit != 3 || len(ring) != 3 {
		t.Errorf("after the throttle: key limit %d, ring %d; want 3 and 3", sem.Limit, len(ring))
	}
	honest(t, s, "k")
	done := claims[1:]
	results, err := lifecycle.CompleteMany(ctx, s, done, true, false, now.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lifecycle.RecoverMany(ctx, s, done, []lifecycle.Adaptive{both, both, both}, results, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if len(s.Adapts) != 0 || s.Semaphores["k"].Limit != 4 || len(s.Rings["g/r"]) != 4 {
		t.Errorf("after 3 completions at 3: adaptive rows %+v, key limit %d, ring %d; want none, 4, 4",
			s.Adapts, s.Semaphores["k"].Limit, len(s.Rings["g/r"]))
	}
	honest(t, s, "k")
}

// TestThrottleByTheQueuePolicy: with no floor of its kind (0), a
// throttle reads the queue policy's Adaptive Min under the key's lock:
// the key of a To 4 job falls to 3 with the policy's Min on its row; a
// kind's own floor beats the policy's.
func TestThrottleByTheQueuePolicy(t *testing.T) {
	s := memstore.New()
	s.Policies["q"] = driver.Policy{Queue: "q", Namespace: "ns", AdaptiveMin: 2}
	enqueue(t, s, job("k", 4, driver.Block, 0), job("k", 4, driver.Block, 0))
	c := claim(t, s)
	r, ad, err := lifecycle.Throttle(ctx, s, c, lifecycle.Adaptive{Key: 0}, now.Add(time.Minute), now.Add(time.Second))
	if err != nil || r.State != driver.StateScheduled || ad != (lifecycle.Adapted{Key: "k", From: 4, To: 3}) {
		t.Fatalf("throttle under an adaptive policy: %+v %+v %v, want scheduled, k from 4 to 3", r, ad, err)
	}
	if a := s.Adapts["k"]; a.Limit != 3 || a.Min != 2 {
		t.Errorf("adaptive row %+v, want limit 3 with the policy's Min 2", a)
	}
	honest(t, s, "k")
	c = claim(t, s)
	c.ClaimedAt = now.Add(2 * time.Second) // claimed under the lowered limit
	if _, ad, err = lifecycle.Throttle(ctx, s, c, lifecycle.Adaptive{Key: 1}, now.Add(time.Minute), now.Add(3*time.Second)); err != nil || ad.To != 2 {
		t.Fatalf("throttle with the kind's own floor 1: %+v %v, want 3 to 2", ad, err)
	}
	if a := s.Adapts["k"]; a.Min != 1 {
		t.Errorf("adaptive row %+v, want the kind's own Min 1", a)
	}
	honest(t, s, "k")
}

// TestThrottleByThePolicyKeepsAJobsSlots: the policy's floor (Min 1)
// never goes below the throttled job's slots (3), or it could never be
// admitted again and no completion would raise the limit: a To 4 key
// falls to 3 and stays there.
func TestThrottleByThePolicyKeepsAJobsSlots(t *testing.T) {
	s := memstore.New()
	s.Policies["q"] = driver.Policy{Queue: "q", Namespace: "ns", AdaptiveMin: 1}
	three := func() *driver.NewJob { j := job("k", 4, driver.Block, 0); j.Slots = 3; return j }
	enqueue(t, s, three(), three())
	c := claim(t, s)
	_, ad, err := lifecycle.Throttle(ctx, s, c, lifecycle.Adaptive{Key: 0}, now.Add(time.Minute), now.Add(time.Second))
	if err != nil || ad.From != 4 || ad.To != 3 {
		t.Fatalf("throttle of a job of 3 slots: %+v %v, want 4 to 3", ad, err)
	}
	if a := s.Adapts["k"]; a.Limit != 3 || a.Min != 3 {
		t.Errorf("adaptive row %+v, want limit 3, floor 3 (the job's slots, above the policy's Min 1)", a)
	}
	honest(t, s, "k")
	c = claim(t, s)
	c.ClaimedAt = now.Add(2 * time.Second)
	if _, ad, err = lifecycle.Throttle(ctx, s, c, lifecycle.Adaptive{Key: 0}, now.Add(time.Minute), now.Add(3*time.Second)); err != nil || ad.To != 3 {
		t.Fatalf("second throttle: %+v %v, want the limit kept at 3", ad, err)
	}
	honest(t, s, "k")
}
