// Package dbclock is the clock bq's timestamps follow: the host's clock
// corrected by how far it is from the database server's.
//
// Every time bq stores or judges — a heartbeat, a claim, a semaphore's
// failsafe, a job's scheduled time, a periodic tick — is compared with
// times other hosts wrote. Read from each host's own clock, a host whose
// clock lags looks silent for that much longer and is reaped while
// alive; one whose clock runs ahead is reaped that much late after it
// dies. Read from this clock, every host of the fleet follows the
// database's: a host's skew is measured (Sync) and taken out.
//
// A database with no clock of its own (SQLite: one host) leaves the
// host's clock as it is, and so does a clock the application injected
// (Config.Now, for tests): it is used as given.
package dbclock

import (
	"context"
	"sync/atomic"
	"time"
)

// Tolerance is the difference from the database's clock left
// uncorrected: a measurement lies within half its round trip, and a
// correction that moved by less would only jitter the clock.
const Tolerance = 50 * time.Millisecond

// SlowRead is the longest round trip a measurement trusts.
const SlowRead = time.Second

// reads is how many readings a Sync takes; the one of shortest round
// trip counts.
const reads = 3

// HostNow is the host's own clock: time.Now, but for helper processes
// of the conformance suite that play a host whose clock is off.
var HostNow = time.Now

// Clock is the host's clock plus a correction.
type Clock struct {
	host     func() time.Time
	corrects bool
	off      atomic.Int64 // nanoseconds added to the host's clock
}

// New returns the host's clock (HostNow), uncorrected until the first
// Sync.
func New() *Clock {
	return &Clock{host: func() time.Time { return HostNow() }, corrects: true}
}

// Given returns a clock that reads now as given: Sync measures its skew
// and corrects nothing (an injected clock, Config.Now).
func Given(now func() time.Time) *Clock { return &Clock{host: now} }

// Corrects reports whether Sync corrects the clock (New) or only
// measures it (Given).
func (c *Clock) Corrects() bool { return c.corrects }

// Now is the host's clock, corrected to the database's.
func (c *Clock) Now() time.Time { return c.host().Add(c.Offset()) }

// Host is the host's own clock.
func (c *Clock) Host() time.Time { return c.host() }

// Offset is the correction Now adds to the host's clock.
func (c *Clock) Offset() time.Duration { return time.Duration(c.off.Load()) }

// Sync reads the database's clock (read returns the zero time for a
// database with no clock) and, for a clock that corrects, adopts the
// difference as the correction once it moved by more than Tolerance. It returns how far the host's
// clock is ahead of the database's (negative: behind), and false when it
// could not tell (no clock, an error, or only slow readings).
func (c *Clock) Sync(ctx context.Context, read func(context.Context) (time.Time, error)) (time.Duration, bool) {
	var skew, rtt time.Duration
	found := false
	for range reads {
		before := c.host()
		db, err := read(ctx)
		after := c.host()
		if err != nil || db.IsZero() {
			return 0, false
		}
		r := after.Sub(before)
		if r > SlowRead || r < 0 || (found && r >= rtt) {
			continue
		}
		skew, rtt, found = before.Add(r/2).Sub(db), r, true
	}
	if !found {
		return 0, false
	}
	if d := -skew - c.Offset(); c.corrects && d.Abs() > max(Tolerance, rtt) {
		c.off.Store(int64(-skew))
	}
	return skew, true
}

// First is a first comparison in the background (SyncFirst).
type First struct {
	done   chan struct{}
	cancel context.CancelFunc
}

// SyncFirst compares the clocks once in the background (Sync, within
// 10 s), for a clock that corrects; one that does not is done at once.
func (c *Clock) SyncFirst(read func(context.Context) (time.Time, error)) *First {
	f := &First{done: make(chan struct{}), cancel: func() {}}
	if !c.corrects {
		close(f.done)
		return f
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	f.cancel = cancel
	go func() {
		defer close(f.done)
		defer cancel()
		c.Sync(ctx, read)
	}()
	return f
}

// Wait waits for the comparison to end, for ctx, or for at most d.
func (f *First) Wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.done:
	case <-ctx.Done():
	case <-t.C:
	}
}

// Stop ends the comparison and waits until it has.
func (f *First) Stop() {
	f.cancel()
	<-f.done
}
