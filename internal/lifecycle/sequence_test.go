package lifecycle_test

import (
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/lifecycle"
)

func sequenceJob() *driver.NewJob {
	j := job("k", 1, driver.Block, 0)
	j.Limit.Sequence = true
	return j
}

// sequenceOfTwo stores two jobs of sequence k and claims the first.
func sequenceOfTwo(t *testing.T) (*memstore.Store, *driver.Claim) {
	t.Helper()
	s := memstore.New()
	enqueue(t, s, sequenceJob(), sequenceJob())
	return s, claim(t, s)
}

// A sequence's failing job keeps its slot through its retry: nothing is
// promoted, the retry is a holder while scheduled, and it comes due
// ready without taking a slot again; the next job runs only after it.
func TestSequenceRetryKeepsTheSlot(t *testing.T) {
	s, c := sequenceOfTwo(t)
	r, err := lifecycle.Retry(ctx, s, c, "boom", now.Add(time.Minute), now)
	if err != nil || r.State != driver.StateScheduled || r.Promoted.Jobs != 0 {
		t.Fatalf("Retry = %+v, %v; want scheduled, nothing promoted", r, err)
	}
	honest(t, s, "k")
	if got := s.Jobs[c.ID]; !got.SlotHeld {
		t.Fatalf("the retry does not hold its slot: %+v", got)
	}
	if jobs, _, _, err := lifecycle.AdmitDue(ctx, s, 10, now.Add(30*time.Second)); err != nil || len(jobs) != 0 {
		t.Fatalf("AdmitDue before the retry is due: %d jobs, %v", len(jobs), err)
	}
	jobs, states, promoted, err := lifecycle.AdmitDue(ctx, s, 10, now.Add(time.Minute))
	if err != nil || len(jobs) != 1 || jobs[0].ID != c.ID || states[0] != driver.StateReady || promoted.Jobs != 0 {
		t.Fatalf("AdmitDue of the retry: %v %v %+v %v; want it ready, nothing promoted", jobs, states, promoted, err)
	}
	honest(t, s, "k")
	if s.Jobs[c.ID].SlotHeld {
		t.Errorf("the admitted retry is still marked as holding while scheduled")
	}
	again := claim(t, s)
	if again.ID != c.ID {
		t.Fatalf("claimed job %d, want the retried job %d first", again.ID, c.ID)
	}
	r, err = lifecycle.Complete(ctx, s, again, true, now.Add(time.Minute))
	if err != nil || r.Promoted.Jobs != 1 {
		t.Fatalf("Complete = %+v, %v; want the next job promoted", r, err)
	}
	honest(t, s, "k")
}

// A sequence's snooze keeps the slot too; a cancel of the held retry
// releases it to the next job.
func TestSequenceCancelOfAHeldRetryReleases(t *testing.T) {
	s, c := sequenceOfTwo(t)
	if r, err := lifecycle.Snooze(ctx, s, c, now.Add(time.Minute), now); err != nil || r.Promoted.Jobs != 0 {
		t.Fatalf("Snooze = %+v, %v; want nothing promoted", r, err)
	}
	honest(t, s, "k")
	out, err := lifecycle.Cancel(ctx, s, c.ID, now)
	if err != nil || out.State != driver.StateCancelled || out.Promoted.Jobs != 1 {
		t.Fatalf("Cancel of the held retry = %+v, %v; want cancelled, the next job promoted", out, err)
	}
	honest(t, s, "k")
}

// A failed attempt retried at once goes back to ready, keeping its slot.
func TestSequenceImmediateRetryStaysReady(t *testing.T) {
	s, c := sequenceOfTwo(t)
	r, err := lifecycle.Retry(ctx, s, c, "boom", now, now)
	if err != nil || r.State != driver.StateReady || r.Promoted.Jobs != 0 {
		t.Fatalf("Retry now = %+v, %v; want ready, nothing promoted", r, err)
	}
	honest(t, s, "k")
}

// A halting sequence's job that fails for good keeps the slot; retried
// by hand it is ready at once; discarded by hand it releases the slot.
func TestSequenceHaltKeepsTheSlotUntilRetriedOrDiscarded(t *testing.T) {
	s := memstore.New()
	halting := func() *driver.NewJob { j := sequenceJob(); j.Limit.SequenceHalt = true; return j }
	enqueue(t, s, halting(), halting())
	c := claim(t, s)
	if r, err := lifecycle.Fail(ctx, s, c, "boom", now); err != nil || r.Promoted.Jobs != 0 {
		t.Fatalf("Fail = %+v, %v; want nothing promoted: the sequence halts", r, err)
	}
	honest(t, s, "k")
	job, state, promoted, err := lifecycle.RetryFailed(ctx, s, c.ID, now)
	if err != nil || job == nil || state != driver.StateReady || promoted.Jobs != 0 {
		t.Fatalf("RetryFailed = %v %s %+v %v; want ready, nothing promoted", job, state, promoted, err)
	}
	honest(t, s, "k")
	c = claim(t, s)
	if _, err := lifecycle.Fail(ctx, s, c, "boom again", now); err != nil {
		t.Fatal(err)
	}
	if _, p, err := lifecycle.DiscardFailed(ctx, s, c.ID, now); err != nil || p.Jobs != 1 {
		t.Fatalf("DiscardFailed promoted %+v, %v; want the next job", p, err)
	}
	honest(t, s, "k")
}
