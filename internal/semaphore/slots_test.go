package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/semaphore"
)

// TestSlotsHeadWaitsAndTheLineBehindIt: a line whose head takes 3 slots
// is not promoted while fewer are free, not even the 1-slot job behind
// it (no barging); a release that frees enough starts the head, then the
// job behind it as soon as its slot is free; Reclaim counts slots.
func TestSlotsHeadWaitsAndTheLineBehindIt(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	insert := func(state driver.JobState, slots int) int64 {
		t.Helper()
		j := &driver.NewJob{Kind: "k", Queue: "q", Limit: driver.Limit{Key: "h", To: 4}, Slots: slots, State: state}
		if err := s.JobInsertMany(ctx, now, []*driver.NewJob{j}); err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	insert(driver.StateReady, 3) // holds 3 of 4
	heavy, light := insert(driver.StateBlocked, 3), insert(driver.StateBlocked, 1)
	s.Semaphores["h"] = &driver.Semaphore{Key: "h", Value: 1, Limit: 4, Blocked: 2, Multi: 1, Duration: time.Minute, ExpiresAt: now.Add(time.Minute)}
	state := func(id int64) driver.JobState { return s.Jobs[id].State }
	if p, err := semaphore.Promote(ctx, s, "h", now); err != nil || p.Jobs != 0 {
		t.Fatalf("Promote with 1 free before a head of 3 = %+v, %v; want nothing promoted", p, err)
	}
	if state(light) != driver.StateBlocked {
		t.Fatalf("the 1-slot job behind a head of 3 was promoted past it")
	}
	if msg := s.Honest("h"); msg != "" {
		t.Errorf("after Promote: %s", msg)
	}
	// 2 more free: the head starts, the job behind it has none left.
	p, err := semaphore.ReleaseN(ctx, s, "h", 2, now)
	if err != nil || p.Jobs != 1 || state(heavy) != driver.StateReady || state(light) != driver.StateBlocked {
		t.Fatalf("ReleaseN(2) = %+v, %v; heavy %s, light %s; want the head of 3 alone ready", p, err, state(heavy), state(light))
	}
	if got := s.Semaphores["h"]; got.Value != 0 || got.Blocked != 1 || got.Multi != 0 {
		t.Errorf("semaphore after the head left = %+v, want value 0, 1 blocked, multi 0", *got)
	}
	if p, err := semaphore.ReleaseN(ctx, s, "h", 1, now); err != nil || p.Jobs != 1 || state(light) != driver.StateReady {
		t.Fatalf("ReleaseN(1) = %+v, %v; want the 1-slot job ready", p, err)
	}
	// Reclaim recounts from the rows: the first holder is still ready in
	// this store (the test gave its slots back by hand), so 3 + 3 + 1
	// slots are held.
	s.Semaphores["h"].Value = 4
	if _, err := semaphore.Reclaim(ctx, s, "h", now); err != nil {
		t.Fatal(err)
	}
	if got := s.Semaphores["h"].Value; got != 4-3-3-1 {
		t.Errorf("Reclaim's free = %d, want %d (holders of 3, 3 and 1 slots)", got, 4-3-3-1)
	}
}
