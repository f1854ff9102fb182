package lifecycle_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/ratelimit"
)

var rateNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func rated(n int, key string, limit int, period time.Duration) []*driver.NewJob {
	jobs := make([]*driver.NewJob, n)
	for i := range jobs {
		jobs[i] = &driver.NewJob{Kind: "k", Queue: "q", MaxAttempts: 3, ScheduledAt: rateNow,
			Rate: driver.RateSpec{Key: key, Limit: limit, Period: period}}
	}
	return jobs
}

// claimAll claims every ready job of queue q at now, as a worker would.
func claimAll(t *testing.T, s *memstore.Store, now time.Time) []*driver.Claim {
	t.Helper()
	claims, err := s.ReadyClaim(context.Background(), driver.ClaimParams{Queue: "q", Max: 1000, ProcessID: 1, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return claims
}

// A burst over a rate makes only Limit jobs ready, each with a slot
// reserved; the rest wait in the key's line, and the line is due when
// the oldest start is a period old.
func TestRateAdmissionReservesOrFilesInLine(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	verdicts, _, err := lifecycle.Admit(ctx, s, rated(5, "g/k", 2, time.Second), rateNow)
	if err != nil {
		t.Fatal(err)
	}
	var states []driver.JobState
	for _, v := range verdicts {
		states = append(states, v.State)
	}
	want := []driver.JobState{driver.StateReady, driver.StateReady, driver.StateBlocked, driver.StateBlocked, driver.StateBlocked}
	if !slices.Equal(states, want) {
		t.Fatalf("states %v, want %v", states, want)
	}
	// Every slot is reserved, so the line's next look is a period on.
	if r := s.Rates["g/k"]; r.Waiting != 3 || !r.NextAt.Equal(rateNow.Add(time.Second)) {
		t.Errorf("rate row %+v: want 3 waiting, next look at %s", r, rateNow.Add(time.Second))
	}
	reserved := 0
	for _, sl := range s.Rings["g/k"] {
		if sl.Job != 0 {
			reserved++
		}
	}
	if reserved != 2 {
		t.Errorf("%d slots reserved, want 2", reserved)
	}
}

// Claims start on their reservations; a claim with none, and no free
// slot, goes back to the line unrun; the starts are a period apart per
// slot.
func TestStartRatedCountsStartsAndFilesTheRest(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	if _, _, err := lifecycle.Admit(ctx, s, rated(2, "g/k", 2, time.Second), rateNow); err != nil {
		t.Fatal(err)
	}
	// A third job reaches ready by another path (a retry, a promotion of
	// its concurrency key): no reservation.
	extra := rated(1, "g/k", 2, time.Second)[0]
	extra.State = driver.StateReady
	if err := s.JobInsertMany(ctx, rateNow, []*driver.NewJob{extra}); err != nil {
		t.Fatal(err)
	}
	claims := claimAll(t, s, rateNow)
	clock := func() time.Time { return rateNow }
	starts, _, err := lifecycle.StartRated(ctx, s, claims, clock, 0)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for i, st := range starts {
		if st.Run {
			ran++
			if want := rateNow.Add(ratelimit.StartSlack(time.Second)); !st.StartBy.Equal(want) {
				t.Errorf("claim %d must start by %s, want %s", i, st.StartBy, want)
			}
		}
	}
	if ran != 2 {
		t.Fatalf("%d claims may run, want 2 (the limit)", ran)
	}
	if r := s.Jobs[extra.ID]; r.State != driver.StateBlocked || r.Line != driver.RateLine("g/k") {
		t.Errorf("the claim with no slot is %s in line %q, want blocked in the rate line", r.State, r.Line)
	}
	if r := s.Rates["g/k"]; r.Waiting != 1 {
		t.Errorf("waiting %d, want 1", r.Waiting)
	}
	// Not before a period after the starts as counted (their StartBy
	// plus the slack again: a job's own reading of the clock may lag its
	// begin gate) does the line move.
	slack := ratelimit.StartSlack(time.Second)
	for _, early := range []time.Duration{time.Second, time.Second + slack, time.Second + 2*slack - time.Microsecond} {
		p, err := lifecycle.PromoteRate(ctx, s, "g/k", false, rateNow.Add(early))
		if err != nil || p.Jobs != 0 {
			t.Fatalf("promotion %s after the claims, inside the counted slack (%s): %+v, %v; want nothing", early, 2*slack, p, err)
		}
	}
	p, err := lifecycle.PromoteRate(ctx, s, "g/k", false, rateNow.Add(time.Second+2*slack))
	if err != nil || p.Jobs != 1 {
		t.Fatalf("promotion once the starts are a period old: %+v, %v; want the waiting job", p, err)
	}
	if r := s.Jobs[extra.ID]; r.State != driver.StateReady {
		t.Errorf("waiting job is %s after the promotion, want ready", r.State)
	}
}

// A run that began too late goes back to the line, its attempt
// uncounted, and gives its start back: the slot is free again at once,
// unless another start has taken it since.
func TestStartedLateGoesBackToTheLine(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	if _, _, err := lifecycle.Admit(ctx, s, rated(1, "g/k", 1, time.Second), rateNow); err != nil {
		t.Fatal(err)
	}
	claims := claimAll(t, s, rateNow)
	starts, _, err := lifecycle.StartRated(ctx, s, claims, func() time.Time { return rateNow }, 0)
	if err != nil || !starts[0].Run {
		t.Fatalf("StartRated: %+v, %v", starts, err)
	}
	claims[0].StartBy, claims[0].StartSlack, claims[0].RateSlot = starts[0].StartBy, starts[0].Slack, starts[0].Slot
	late := rateNow.Add(2 * time.Second)
	res, err := lifecycle.StartedLate(ctx, s, claims[0], late)
	if err != nil || !res.Matched {
		t.Fatalf("StartedLate: %+v, %v; want matched", res, err)
	}
	if r := s.Jobs[claims[0].ID]; r.Attempt != 0 {
		t.Errorf("job after a late start: attempt %d, want 0", r.Attempt)
	}
	// Its start given back, the slot was free at once, so the line
	// promoted the job again, with the slot reserved.
	if r := s.Jobs[claims[0].ID]; r.State != driver.StateReady || res.Promoted.Jobs != 1 {
		t.Errorf("job after a late start: %s, promoted %+v; want ready again, its start given back", r.State, res.Promoted)
	}
	// A start stamped since on the slot (a long freeze) is not given back.
	if ok, err := s.RateSlotUnstamp(ctx, driver.RateUnstampParams{Key: "g/k", Slot: starts[0].Slot, Stamped: starts[0].StartBy, To: rateNow}); err != nil || ok {
		t.Errorf("UnstampSlot of a slot no longer holding the start = %v, %v; want false", ok, err)
	}
}

// A process whose rated runs lately began late claims with a slack wide
// enough to cover it, at most an eighth of the period: the ring counts
// the wider slack (the line moves a period after claim plus twice the
// slack, not before), and a run late even so gives back the very start
// its claim stamped.
func TestStartRatedWidensTheSlackOfALaggingProcess(t *testing.T) {
	for _, tc := range []struct {
		lag, slack time.Duration
	}{
		{0, ratelimit.StartSlack(time.Second)},
		{4 * time.Millisecond, ratelimit.StartSlack(time.Second)},
		{40 * time.Millisecond, 60 * time.Millisecond},
		{time.Minute, time.Second / 8},
	} {
		t.Run(tc.lag.String(), func(t *testing.T) {
			ctx := context.Background()
			s := memstore.New()
			if _, _, err := lifecycle.Admit(ctx, s, rated(2, "g/k", 1, time.Second), rateNow); err != nil {
				t.Fatal(err)
			}
			claims := claimAll(t, s, rateNow)
			starts, _, err := lifecycle.StartRated(ctx, s, claims, func() time.Time { return rateNow }, tc.lag)
			if err != nil || len(starts) != 1 || !starts[0].Run {
				t.Fatalf("StartRated: %+v, %v; want one run", starts, err)
			}
			if st := starts[0]; st.Slack != tc.slack || !st.StartBy.Equal(rateNow.Add(tc.slack)) {
				t.Fatalf("lag %s: start by %s with slack %s; want slack %s", tc.lag, st.StartBy.Sub(rateNow), st.Slack, tc.slack)
			}
			p, err := lifecycle.PromoteRate(ctx, s, "g/k", false, rateNow.Add(time.Second+2*tc.slack-time.Microsecond))
			if err != nil || p.Jobs != 0 {
				t.Fatalf("promotion inside the counted slack: %+v, %v; want nothing", p, err)
			}
			c := claims[0]
			c.StartBy, c.StartSlack, c.RateSlot = starts[0].StartBy, starts[0].Slack, starts[0].Slot
			res, err := lifecycle.StartedLate(ctx, s, c, c.StartBy.Add(time.Millisecond))
			if err != nil || !res.Matched {
				t.Fatalf("StartedLate: %+v, %v; want matched", res, err)
			}
			// The start given back, the slot is free: the second job is
			// promoted into it at once.
			if res.Promoted.Jobs != 1 {
				t.Errorf("after a late start with slack %s: promoted %+v, want the other job (its start given back)", tc.slack, res.Promoted)
			}
		})
	}
}

// A lowered rate keeps the newest starts; a raised one makes the line
// ready at once.
func TestApplyRateResizesTheRing(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	if _, _, err := lifecycle.Admit(ctx, s, rated(4, "g/k", 1, time.Hour), rateNow); err != nil {
		t.Fatal(err)
	}
	if err := s.KeyRateSet(ctx, driver.RateSpec{Key: "g/k", Limit: 10, Period: time.Hour}, rateNow); err != nil {
		t.Fatal(err)
	}
	p, err := lifecycle.ApplyRate(ctx, s, driver.RateSpec{Key: "g/k", Limit: 10, Period: time.Hour}, rateNow)
	if err != nil || p.Jobs != 3 {
		t.Fatalf("raised rate promoted %+v, %v; want the 3 waiting jobs", p, err)
	}
	if n := len(s.Rings["g/k"]); n != 10 {
		t.Errorf("ring of %d slots, want 10", n)
	}
	if _, err := s.KeyRateDelete(ctx, "g/k"); err != nil {
		t.Fatal(err)
	}
	if _, err := lifecycle.ApplyRate(ctx, s, driver.RateSpec{Key: "g/k", Limit: 2, Period: time.Hour}, rateNow); err != nil {
		t.Fatal(err)
	}
	ring := s.Rings["g/k"]
	if len(ring) != 2 {
		t.Fatalf("ring of %d slots, want 2", len(ring))
	}
	for _, sl := range ring {
		if sl.Job == 0 {
			t.Errorf("lowering dropped a reservation before an unused slot: %+v", ring)
		}
	}
}

// A line whose row counts none waiting is recounted from its rows and
// promoted into the free slots, rather than stalled.
func TestRecountRateHealsADriftedCount(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	if _, _, err := lifecycle.Admit(ctx, s, rated(3, "g/k", 1, time.Second), rateNow); err != nil {
		t.Fatal(err)
	}
	s.Rates["g/k"].Waiting = 0 // drifted
	if keys, _ := s.RateListStrayLines(ctx, 10); len(keys) != 1 {
		t.Fatalf("StrayLines = %v, want the drifted key", keys)
	}
	// The reserved job was cancelled meanwhile: its slot is free again.
	ready := s.Of("", driver.StateReady)
	if _, err := lifecycle.Cancel(ctx, s, ready[0].ID, rateNow); err != nil {
		t.Fatal(err)
	}
	s.Rates["g/k"].Waiting = 0
	n, p, err := lifecycle.RecountRate(ctx, s, "g/k", rateNow)
	if err != nil || n != 2 || p.Jobs != 1 {
		t.Fatalf("RecountRate = %d, %+v, %v; want 2 counted, 1 promoted into the free slot", n, p, err)
	}
	if r := s.Rates["g/k"]; r.Waiting != 1 || r.NextAt.IsZero() {
		t.Errorf("rate row after the recount: %+v, want 1 waiting with a next look", r)
	}
}
