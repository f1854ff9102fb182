package lifecycle_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/lifecycle"
)

var (
	ctx = context.Background()
	now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

func job(key string, to int, onConflict driver.OnConflict, prio int) *driver.NewJob {
	return &driver.NewJob{Kind: "k", Queue: "q", Priority: prio, MaxAttempts: 3, ScheduledAt: now,
		Limit: driver.Limit{Key: key, To: to, Duration: time.Minute, OnConflict: onConflict}}
}

func enqueue(t *testing.T, s *memstore.Store, jobs ...*driver.NewJob) []lifecycle.Verdict {
	t.Helper()
	v, _, err := lifecycle.Admit(ctx, s, jobs, now)
	if err != nil {
		t.Fatal(err)
	}
	honest(t, s, "k")
	return v
}

func honest(t *testing.T, s *memstore.Store, key string) {
	t.Helper()
	if msg := s.Honest(key); msg != "" {
		t.Fatalf("semaphore %s: %s (%+v)", key, msg, *s.Semaphores[key])
	}
}

func states(v []lifecycle.Verdict) string {
	var b []string
	for _, x := range v {
		b = append(b, string(x.State))
	}
	return strings.Join(b, ",")
}

func claim(t *testing.T, s *memstore.Store) *driver.Claim {
	t.Helper()
	c, err := s.ReadyClaim(ctx, driver.ClaimParams{Queue: "q", Max: 1, Now: now})
	if err != nil || len(c) != 1 {
		t.Fatalf("claim: %v %v", c, err)
	}
	return c[0]
}

func TestAdmissionHigherPriorityTakesTheSlot(t *testing.T) {
	s := memstore.New()
	v := enqueue(t, s, job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 9), job("k", 1, driver.Block, 0))
	if got := states(v); got != "blocked,ready,blocked" {
		t.Fatalf("verdicts %s, want blocked,ready,blocked", got)
	}
}

func TestAdmissionDiscardsWithAReason(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 1, driver.Block, 0))
	v := enqueue(t, s, job("k", 1, driver.Discard, 0))
	if v[0].State != driver.StateDiscarded || !strings.Contains(v[0].Reason, `"k"`) {
		t.Fatalf("verdict %+v, want discarded naming the key", v[0])
	}
	if len(s.Jobs) != 1 {
		t.Errorf("%d jobs stored, want 1: a discarded new job is not kept", len(s.Jobs))
	}
}

func TestAdmissionDiscardsBeyondMaxBlocked(t *testing.T) {
	s := memstore.New()
	full := func() *driver.NewJob { j := job("k", 1, driver.Block, 0); j.Limit.MaxBlocked = 1; return j }
	v := enqueue(t, s, full(), full(), full())
	if got := states(v); got != "ready,blocked,discarded" {
		t.Fatalf("verdicts %s, want ready,blocked,discarded", got)
	}
}

func TestBlockedJobsGoBeforeAFreshEnqueue(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 0))
	// A slot frees without a release (a recount raised the limit): the
	// blocked job must take it before the fresh one.
	s.Semaphores["k"].Value, s.Semaphores["k"].Limit = 1, 2
	s.Overrides["k"] = 2
	v := enqueue(t, s, job("k", 1, driver.Block, 9))
	if v[0].State != driver.StateBlocked {
		t.Fatalf("fresh job %s beside a blocked one, want blocked", v[0].State)
	}
}

func TestCompleteWithAStaleFenceChangesNothing(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 0))
	c := claim(t, s)
	stale := *c
	stale.Fence++
	r, err := lifecycle.Complete(ctx, s, &stale, true, now)
	if err != nil || r.Matched {
		t.Fatalf("stale completion: %+v %v, want no match", r, err)
	}
	honest(t, s, "k")
	r, err = lifecycle.Complete(ctx, s, c, true, now)
	if err != nil || !r.Matched || r.Promoted.Jobs != 1 {
		t.Fatalf("completion: %+v %v, want a match promoting the blocked job", r, err)
	}
	honest(t, s, "k")
	// Completing the same claim again releases nothing.
	if r, _ := lifecycle.Complete(ctx, s, c, true, now); r.Matched {
		t.Fatal("a second completion of one claim matched")
	}
	honest(t, s, "k")
}

func TestCompleteManyReleasesEachKeyOnce(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 2, driver.Block, 0), job("k", 2, driver.Block, 0), job("k", 2, driver.Block, 0), job("k", 2, driver.Block, 0))
	a, b := claim(t, s), claim(t, s)
	rs, err := lifecycle.CompleteMany(ctx, s, []*driver.Claim{a, b, a}, true, false, now)
	if err != nil {
		t.Fatal(err)
	}
	if !rs[0].Matched || !rs[1].Matched || rs[0].Promoted.Jobs != 2 {
		t.Fatalf("results %+v, want both matched and the key's two blocked jobs promoted once", rs)
	}
	honest(t, s, "k")
}

func TestRetryLaterReleasesTheSlot(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 0))
	c := claim(t, s)
	r, err := lifecycle.Retry(ctx, s, c, "boom", now.Add(time.Minute), now)
	if err != nil || r.State != driver.StateScheduled || r.Promoted.Jobs != 1 {
		t.Fatalf("retry later: %+v %v, want scheduled, the blocked job promoted", r, err)
	}
	honest(t, s, "k")
}

func TestRetryNowQueuesBehindTheBlocked(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 0))
	c := claim(t, s)
	r, err := lifecycle.Retry(ctx, s, c, "boom", now, now)
	if err != nil || r.State != driver.StateBlocked {
		t.Fatalf("retry now: %+v %v, want blocked behind the job already waiting", r, err)
	}
	honest(t, s, "k")
}

func TestReapKeepsTheSlotUntilAttemptsAreSpent(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 0))
	c := claim(t, s)
	r, err := lifecycle.Reap(ctx, s, c, lifecycle.ReapMessage, now)
	if err != nil || r.State != driver.StateReady || r.Promoted.Jobs != 0 {
		t.Fatalf("reap with attempts left: %+v %v, want ready keeping its slot", r, err)
	}
	honest(t, s, "k")
	for range 2 {
		c = claim(t, s)
		if r, err = lifecycle.Reap(ctx, s, c, lifecycle.ReapMessage, now); err != nil {
			t.Fatal(err)
		}
	}
	if r.State != driver.StateFailed || r.Promoted.Jobs != 1 {
		t.Fatalf("reap of the last attempt: %+v, want failed, the blocked job promoted", r)
	}
	honest(t, s, "k")
}

func TestReturnKeepsTheSlotAndTheAttempt(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 1, driver.Block, 0))
	c := claim(t, s)
	if _, err := lifecycle.Unclaim(ctx, s, c, now); err != nil {
		t.Fatal(err)
	}
	if got := s.Jobs[c.ID]; got.State != driver.StateReady || got.Attempt != 0 {
		t.Fatalf("returned job %s attempt %d, want ready, 0", got.State, got.Attempt)
	}
	honest(t, s, "k")
}

func TestRetryFailedGoesThroughAdmission(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 1, driver.Discard, 0))
	c := claim(t, s)
	if _, err := lifecycle.Fail(ctx, s, c, "boom", now); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, job("k", 1, driver.Block, 0)) // takes the freed slot
	got, state, _, err := lifecycle.RetryFailed(ctx, s, c.ID, now)
	if err != nil || got == nil || state != driver.StateDiscarded {
		t.Fatalf("retry of a failed discard-on-conflict job beside a holder: %v %s %v, want discarded", got, state, err)
	}
	honest(t, s, "k")
	if j, _, _, _ := lifecycle.RetryFailed(ctx, s, c.ID, now); j != nil {
		t.Fatal("a job retried twice by hand was admitted twice")
	}
}

func TestSnoozeReleasesTheSlotWithoutSpendingTheAttempt(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 0))
	c := claim(t, s)
	later := now.Add(time.Minute)
	r, err := lifecycle.Snooze(ctx, s, c, later, now)
	if err != nil || !r.Matched || r.State != driver.StateScheduled || r.Promoted.Jobs != 1 {
		t.Fatalf("snooze: %+v %v, want scheduled, the blocked job promoted", r, err)
	}
	got := s.Jobs[c.ID]
	if got.State != driver.StateScheduled || !got.ScheduledAt.Equal(later) || got.Attempt != 0 || got.LastError != "" {
		t.Fatalf("snoozed job %s at %s attempt %d error %q, want scheduled at %s, attempt 0, no error",
			got.State, got.ScheduledAt, got.Attempt, got.LastError, later)
	}
	honest(t, s, "k")
	// A second end of the same claim changes nothing.
	if r, _ := lifecycle.Snooze(ctx, s, c, later, now); r.Matched {
		t.Fatal("a second snooze of one claim matched")
	}
	honest(t, s, "k")
}

func TestSnoozedJobIsAdmittedWhenDue(t *testing.T) {
	s := memstore.New()
	snoozer := job("k", 1, driver.Discard, 0)
	enqueue(t, s, snoozer)
	c := claim(t, s)
	later := now.Add(time.Minute)
	if _, err := lifecycle.Snooze(ctx, s, c, later, now); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, job("k", 1, driver.Block, 0)) // takes the freed slot
	_, outcomes, _, err := lifecycle.AdmitDue(ctx, s, 10, later)
	if err != nil || len(outcomes) != 1 || outcomes[0] != driver.StateDiscarded {
		t.Fatalf("due snoozed discard-on-conflict job beside a holder: %v %v, want discarded", outcomes, err)
	}
	honest(t, s, "k")
}

func TestSnoozeRefusesAPastTime(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 1, driver.Block, 0))
	c := claim(t, s)
	if _, err := lifecycle.Snooze(ctx, s, c, now, now); err == nil {
		t.Fatal("a snooze due now was accepted")
	}
	if got := s.Jobs[c.ID].State; got != driver.StateRunning {
		t.Fatalf("job %s after a refused snooze, want still running", got)
	}
}
