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
