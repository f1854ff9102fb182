package lifecycle_test

import (
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/lifecycle"
)

// TestReleasesMeasureTheInterval: completions of a key with a line keep
// its release interval (driver.Released): the first sets the last
// release, the next samples 100ms whole, the third weighs its 200ms a
// quarter.
func TestReleasesMeasureTheInterval(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 0))
	for _, at := range []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond} {
		if _, err := lifecycle.CompleteMany(ctx, s, []*driver.Claim{claim(t, s)}, true, false, now.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Semaphores["k"].Interval; got != 125*time.Millisecond {
		t.Errorf("release interval %s, want 125ms ((100ms×3 + 200ms) / 4)", got)
	}
}

// TestMaxWaitRefusesWithTheExpectedWait: with an interval of 100ms, a
// job third in line (300ms) is refused by MaxWait 250ms, stored nothing,
// its verdict carrying the expected wait; second in line (200ms) it is
// blocked with its expected wait; a job without MaxWait is never refused.
func TestMaxWaitRefusesWithTheExpectedWait(t *testing.T) {
	s := memstore.New()
	bounded := func() *driver.NewJob {
		j := job("k", 1, driver.Block, 0)
		j.Limit.MaxWait = 250 * time.Millisecond
		return j
	}
	enqueue(t, s, bounded(), bounded())
	s.Semaphores["k"].Interval = 100 * time.Millisecond
	v := enqueue(t, s, bounded(), bounded(), job("k", 1, driver.Block, 0))
	want := []lifecycle.Wait{
		{Key: "k", Expected: 200 * time.Millisecond, Interval: 100 * time.Millisecond},
		{Key: "k", Expected: 300 * time.Millisecond, Interval: 100 * time.Millisecond, MaxWait: 250 * time.Millisecond},
		{Key: "k", Expected: 300 * time.Millisecond, Interval: 100 * time.Millisecond},
	}
	if got := states(v); got != "blocked,discarded,blocked" {
		t.Fatalf("verdicts %s, want blocked,discarded,blocked", got)
	}
	for i, w := range want {
		if v[i].Wait != w {
			t.Errorf("verdict %d: wait %+v, want %+v", i, v[i].Wait, w)
		}
	}
	if len(s.Jobs) != 4 {
		t.Errorf("%d jobs stored, want 4: a refused job is not kept", len(s.Jobs))
	}
}
