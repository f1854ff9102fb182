package dbclock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeHost is a host clock that moves only when a reading takes time.
type fakeHost struct{ at time.Time }

func (h *fakeHost) now() time.Time { return h.at }

// TestSyncTrustsTheQuickestReading: of a Sync's readings, the one of
// shortest round trip sets the correction (the database's reading is
// taken halfway through it); readings slower than SlowRead, or a failed
// one, correct nothing.
func TestSyncTrustsTheQuickestReading(t *testing.T) {
	ctx := context.Background()
	host := &fakeHost{at: time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)}
	defer func(old func() time.Time) { HostNow = old }(HostNow)
	HostNow = host.now
	c := New()
	// The database runs 30 s ahead; the readings take 400, 100 and 300
	// ms, the database's clock read 10 ms into each.
	trips := []time.Duration{400 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond}
	i := 0
	read := func(context.Context) (time.Time, error) {
		db := host.at.Add(30*time.Second + 10*time.Millisecond)
		host.at = host.at.Add(trips[i%len(trips)])
		i++
		return db, nil
	}
	skew, ok := c.Sync(ctx, read)
	// Halfway through the 100 ms trip is 40 ms after the database's
	// reading: the host looks 30 s - 40 ms behind.
	if want := -(30*time.Second - 40*time.Millisecond); !ok || skew != want {
		t.Fatalf("Sync = %v, %v; want %v, true", skew, ok, want)
	}
	if got, want := c.Offset(), 30*time.Second-40*time.Millisecond; got != want {
		t.Fatalf("Offset = %v, want %v", got, want)
	}
	if got := c.Now().Sub(c.Host()); got != c.Offset() {
		t.Fatalf("Now - Host = %v, want the offset %v", got, c.Offset())
	}

	trips = []time.Duration{2 * SlowRead}
	if _, ok := c.Sync(ctx, read); ok {
		t.Fatal("Sync with only slow readings: ok, want not trusted")
	}
	failed := func(context.Context) (time.Time, error) { return time.Time{}, errors.New("down") }
	if _, ok := c.Sync(ctx, failed); ok {
		t.Fatal("Sync with a failed reading: ok")
	}
	none := func(context.Context) (time.Time, error) { return time.Time{}, nil }
	if _, ok := c.Sync(ctx, none); ok {
		t.Fatal("Sync with a database with no clock: ok")
	}
	if got, want := c.Offset(), 30*time.Second-40*time.Millisecond; got != want {
		t.Fatalf("Offset after untrusted readings = %v, want it kept at %v", got, want)
	}

	// A clock given (Config.Now) is measured, never corrected.
	g := Given(host.now)
	trips = []time.Duration{time.Millisecond}
	if skew, ok := g.Sync(ctx, read); !ok || skew > -29*time.Second {
		t.Fatalf("Given clock: Sync = %v, %v; want about -30s, true", skew, ok)
	}
	if g.Offset() != 0 || !g.Now().Equal(host.now()) || g.Corrects() {
		t.Fatalf("Given clock corrected: offset %v", g.Offset())
	}
}

// TestSyncFirst: the first comparison in the background corrects the
// clock once it ends (Wait); a clock given as is never compares, and
// Stop ends a comparison waiting on a database that does not answer.
func TestSyncFirst(t *testing.T) {
	ctx := context.Background()
	db := time.Now().Add(time.Minute)
	c := New()
	c.SyncFirst(func(context.Context) (time.Time, error) { return db, nil }).Wait(ctx, 5*time.Second)
	if off := c.Offset(); off < 59*time.Second || off > 61*time.Second {
		t.Fatalf("after the first comparison: offset %v, want about a minute", off)
	}
	called := false
	Given(time.Now).SyncFirst(func(context.Context) (time.Time, error) { called = true; return db, nil }).Wait(ctx, time.Second)
	if called {
		t.Fatal("a clock given as is read the database's clock")
	}
	hung := New().SyncFirst(func(ctx context.Context) (time.Time, error) { <-ctx.Done(); return time.Time{}, ctx.Err() })
	done := make(chan struct{})
	go func() { hung.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not end a comparison waiting on the database")
	}
}
