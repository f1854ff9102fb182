package lifecycle_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/ratelimit"
)

// A rated job with no limit of its own is refused when its queue's
// policy sets no rate, and nothing is stored.
func TestPolicyRateMissingRefusesEnqueue(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	s.Policies["q"] = driver.Policy{Queue: "q", MaxActivePerKey: 2} // a policy, but no rate
	_, _, err := lifecycle.Admit(ctx, s, rated(1, "g/k", 0, 0), rateNow)
	if !errors.Is(err, lifecycle.ErrNoRate) || !strings.Contains(err.Error(), "MaxStartsPerKey") ||
		!strings.Contains(err.Error(), "Rate.Limit") {
		t.Fatalf("enqueue with no rate anywhere: %v, want ErrNoRate naming both fixes", err)
	}
	if len(s.Jobs) != 0 || len(s.Rates) != 0 {
		t.Errorf("%d jobs and %d rate rows stored by a refused enqueue", len(s.Jobs), len(s.Rates))
	}
	// A job with its own rate in the same queue is not refused.
	if _, _, err := lifecycle.Admit(ctx, s, rated(1, "g/own", 1, time.Second), rateNow); err != nil {
		t.Fatalf("enqueue with an own rate: %v", err)
	}
}

// The key's rate resolves override > the job's own > its queue policy's,
// read at each admission and start: a changed policy resizes the ring at
// the key's next admission.
func TestPolicyRateResolutionOrder(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	s.Policies["q"] = driver.Policy{Queue: "q", MaxStartsPerKey: 3, StartsPeriod: 2 * time.Second}
	verdicts, _, err := lifecycle.Admit(ctx, s, rated(5, "g/p", 0, 0), rateNow)
	if err != nil {
		t.Fatal(err)
	}
	if ready := countState(verdicts, driver.StateReady); ready != 3 {
		t.Errorf("%d of 5 ready under the policy's 3 starts per period, want 3", ready)
	}
	if r := s.Rates["g/p"]; r.Limit != 3 || r.Period != 2*time.Second || len(s.Rings["g/p"]) != 3 {
		t.Errorf("rate row %+v with %d slots: want the policy's 3 per 2s", r, len(s.Rings["g/p"]))
	}
	// The job's own rate beats the policy.
	if _, _, err := lifecycle.Admit(ctx, s, rated(1, "g/own", 1, time.Second), rateNow); err != nil {
		t.Fatal(err)
	}
	if r := s.Rates["g/own"]; r.Limit != 1 || r.Period != time.Second {
		t.Errorf("own-rate row %+v: want the job's own 1 per 1s", r)
	}
	// A changed policy applies at the next admission: the ring grows.
	s.Policies["q"] = driver.Policy{Queue: "q", MaxStartsPerKey: 6, StartsPeriod: time.Second}
	later := rateNow.Add(10 * time.Millisecond)
	if _, _, err := lifecycle.Admit(ctx, s, rated(1, "g/p", 0, 0), later); err != nil {
		t.Fatal(err)
	}
	if r := s.Rates["g/p"]; r.Limit != 6 || r.Period != time.Second || len(s.Rings["g/p"]) != 6 {
		t.Errorf("after the policy change: row %+v with %d slots, want 6 per 1s", r, len(s.Rings["g/p"]))
	}
	// An override beats the policy.
	s.RateLimits["g/p"] = driver.RateSpec{Key: "g/p", Limit: 2, Period: time.Second}
	w, err := ratelimit.Lock(ctx, s, driver.RateSpec{Key: "g/p"}, "q", later)
	if err != nil {
		t.Fatal(err)
	}
	if r := w.Row(); r.Limit != 2 || len(s.Rings["g/p"]) != 2 {
		t.Errorf("with an override: row %+v with %d slots, want the override's 2", r, len(s.Rings["g/p"]))
	}
}

// A key whose policy rate was removed keeps its stored rate; one never
// stored has no rate left, and its jobs go to ready unrated.
func TestPolicyRateRemoved(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	s.Policies["q"] = driver.Policy{Queue: "q", MaxStartsPerKey: 1, StartsPeriod: time.Hour}
	if _, _, err := lifecycle.Admit(ctx, s, rated(1, "g/p", 0, 0), rateNow); err != nil {
		t.Fatal(err)
	}
	delete(s.Policies, "q")
	w, err := ratelimit.Lock(ctx, s, driver.RateSpec{Key: "g/p"}, "q", rateNow)
	if err != nil || w == nil || w.Row().Limit != 1 || w.Row().Period != time.Hour {
		t.Fatalf("lock after the policy rate went: %v, %+v; want the stored 1 per hour", err, w)
	}
	if w, err := ratelimit.Lock(ctx, s, driver.RateSpec{Key: "g/new"}, "q", rateNow); err != nil || w != nil {
		t.Fatalf("lock of a key never stored with no rate anywhere: %+v, %v; want none", w, err)
	}
	// A job stored before the policy rate went (scheduled, so its key
	// was never stored) is admitted and started unrated, not stalled.
	s.Policies["q"] = driver.Policy{Queue: "q", MaxStartsPerKey: 1, StartsPeriod: time.Hour}
	job := rated(1, "g/new", 0, 0)[0]
	job.ScheduledAt = rateNow.Add(time.Minute)
	if _, _, err := lifecycle.Admit(ctx, s, []*driver.NewJob{job}, rateNow); err != nil {
		t.Fatal(err)
	}
	delete(s.Policies, "q")
	due := rateNow.Add(2 * time.Minute)
	_, outcomes, _, err := lifecycle.AdmitDue(ctx, s, 10, due)
	if err != nil || len(outcomes) != 1 || outcomes[0] != driver.StateReady {
		t.Fatalf("admit the due job with no rate left: %v, %v; want ready", outcomes, err)
	}
	claims := claimAll(t, s, due)
	starts, _, err := lifecycle.StartRated(ctx, s, claims, func() time.Time { return due }, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range claims {
		if c.Rate.Key == "g/new" && (!starts[i].Run || !starts[i].StartBy.IsZero()) {
			t.Errorf("start with no rate left: %+v; want a run with no start bound", starts[i])
		}
	}
	if _, ok := s.Rates["g/new"]; ok {
		t.Errorf("a rate row was made for a key with no rate")
	}
}

func countState(vs []lifecycle.Verdict, st driver.JobState) int {
	n := 0
	for _, v := range vs {
		if v.State == st {
			n++
		}
	}
	return n
}
