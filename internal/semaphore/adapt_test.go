package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/semaphore"
)

// TestThrottleAndRecover: with 6 holders of a To 6 key, a throttle lowers
// the limit to 5 (free -1: free = limit - holders still), a second
// throttle of a run claimed before that change does nothing, one
// claimed after lowers it again but never below the floor; completions
// raise it by one per limit of them, promoting the blocked job, up to
// To, where the row goes.
func TestThrottleAndRecover(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := driver.Limit{Key: "k", To: 6, Duration: time.Minute}
	sem, err := semaphore.Lock(ctx, s, l, "q", now)
	if err != nil {
		t.Fatal(err)
	}
	if got := sem.Wait(6); got != 6 {
		t.Fatalf("took %d slots, want 6", got)
	}
	sem.Block(1)
	if err := sem.Save(ctx); err != nil {
		t.Fatal(err)
	}
	keyed(t, s, "k", driver.StateBlocked)
	check := func(what string, limit, value int) {
		t.Helper()
		row := s.Semaphores["k"]
		if row.Limit != limit || row.Value != value {
			t.Errorf("%s: limit %d, free %d; want %d, %d", what, row.Limit, row.Value, limit, value)
		}
	}
	from, to, err := semaphore.Throttle(ctx, s, l, "q", 4, 1, now, now.Add(time.Second))
	if err != nil || from != 6 || to != 5 {
		t.Fatalf("first throttle: %d -> %d, %v; want 6 -> 5", from, to, err)
	}
	check("after the first throttle", 5, -1)
	if from, to, _ = semaphore.Throttle(ctx, s, l, "q", 4, 1, now, now.Add(2*time.Second)); from != to {
		t.Errorf("a throttle of a run claimed before the change lowered %d -> %d; want no change", from, to)
	}
	for range 2 {
		if _, to, _ = semaphore.Throttle(ctx, s, l, "q", 4, 1, now.Add(3*time.Second), now.Add(3*time.Second)); to != 4 {
			t.Errorf("a throttle of a run claimed after the change took the limit to %d; want the floor, 4", to)
		}
	}
	check("at the floor", 4, -2)
	// Two holders finish: free 0; four completions raise it to 5, and
	// the blocked job takes the slot.
	for range 2 {
		if _, err := semaphore.Release(ctx, s, "k", now); err != nil {
			t.Fatal(err)
		}
	}
	var promoted driver.Promotion
	for range 4 {
		p, err := semaphore.Recover(ctx, s, l, "q", 1, now.Add(4*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		promoted.Add(p)
	}
	if promoted.Jobs != 1 {
		t.Errorf("raising the limit promoted %d jobs, want the blocked one", promoted.Jobs)
	}
	check("after four completions", 5, 0)
	for range 5 {
		if _, err := semaphore.Recover(ctx, s, l, "q", 1, now.Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	check("back at To", 6, 1)
	if _, ok := s.Adapts["k"]; ok {
		t.Errorf("the adaptive row stayed once the limit was back at To: %+v", s.Adapts["k"])
	}
	// A key not lowered: a completion changes nothing.
	if p, err := semaphore.Recover(ctx, s, l, "q", 1, now.Add(6*time.Second)); err != nil || p.Jobs != 0 {
		t.Errorf("Recover of a key at its own limit = %+v, %v", p, err)
	}
	check("unchanged", 6, 1)
}
