package worker

import (
	"context"
	"time"
)

// clockCheckEvery is how often a running process compares its clock with
// the database's, after the first comparison at its start.
const clockCheckEvery = 5 * time.Minute

// watchClock compares this host's clock with the database server's every
// clockCheckEvery (Run compared them at the start, syncClock), corrects
// the runtime's clock (Config.Clock) by the difference, and warns while
// they differ by a HeartbeatInterval or more. Heartbeats and reaping
// compare timestamps that processes on other hosts wrote: read from each
// host's own clock, a process whose clock lags the dispatcher's would
// look silent for that much longer and be reaped while alive; one whose
// clock runs ahead would be reaped that much late after it dies. Read
// from the corrected clock they follow the database's. SQLite's clock is
// its host's: nothing to compare.
func (c *Runtime) watchClock(ctx context.Context, off bool) {
	t := time.NewTicker(clockCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		off = c.syncClock(ctx, off)
	}
}

// syncClock compares the clocks once and corrects the runtime's; off is
// whether a skew was reported and not yet ended, and it returns the new
// one.
func (c *Runtime) syncClock(ctx context.Context, off bool) bool {
	if skew, ok := c.clockSkew(ctx); ok {
		return c.reportSkew(skew, off)
	}
	return off
}

// clockSkew is how far this host's clock is ahead of the database's
// (negative: behind), taken out of the runtime's clock from now on;
// false when it cannot tell.
func (c *Runtime) clockSkew(ctx context.Context) (time.Duration, bool) {
	return c.cfg.Clock.Sync(ctx, c.drv.Exec().ClockNow)
}

// reportSkew logs a skew of a HeartbeatInterval or more when it starts,
// and when it ends; off is whether one was reported and not yet ended.
func (c *Runtime) reportSkew(skew time.Duration, off bool) bool {
	bad := skew.Abs() >= c.cfg.HeartbeatInterval
	switch {
	case bad && !off:
		way, by := "ahead of", skew
		if skew < 0 {
			way, by = "behind", -skew
		}
		attrs := []any{"by", by.Round(time.Millisecond), "heartbeat_interval", c.cfg.HeartbeatInterval, "process_dead_after", c.cfg.ProcessDeadAfter}
		if c.cfg.Clock.Corrects() {
			c.log.Warn("this host's clock is "+way+" the database's: bq follows the database's clock for what it "+
				"stores and judges (heartbeats, claims, schedules), so this process is neither reaped while alive nor "+
				"spared when dead, but the jobs' own code and logs read this host's clock; keep the hosts' clocks in "+
				"sync (NTP)", attrs...)
			break
		}
		c.log.Warn("the injected clock (Config.Now) is "+way+" the database's, and bq uses it as given: heartbeats and "+
			"reaping compare it with the other processes' clocks, so a process whose clock lags the dispatcher's by "+
			"more than ProcessDeadAfter minus a HeartbeatInterval is reaped while alive (its jobs run twice) and one "+
			"whose clock runs ahead is reaped late; leave Config.Now unset outside tests", attrs...)
	case !bad && off:
		c.log.Info("this host's clock agrees with the database's again", "skew", skew.Round(time.Millisecond))
	}
	return bad
}
