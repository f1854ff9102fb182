package worker

import (
	"context"
	"time"
)

// clockCheckEvery is how often a running process compares its clock with
// the database's, after the first comparison at its start.
const clockCheckEvery = 5 * time.Minute

// clockSlowRead is the longest round trip a comparison trusts: the
// database's reading lies somewhere within it.
const clockSlowRead = time.Second

// watchClock compares this host's clock (Config.Now) with the database
// server's at the start and every clockCheckEvery, and warns while they
// differ by a HeartbeatInterval or more. Heartbeats and reaping compare
// timestamps that each process writes by its own clock: a process whose
// clock lags the dispatcher's looks silent for that much longer, and is
// reaped while alive once the lag passes ProcessDeadAfter minus a
// HeartbeatInterval; one whose clock runs ahead is reaped that much late
// after it dies. SQLite's clock is its host's: nothing to compare.
func (c *Runtime) watchClock(ctx context.Context) {
	t := time.NewTicker(clockCheckEvery)
	defer t.Stop()
	off := false
	for {
		if skew, ok := c.clockSkew(ctx); ok {
			off = c.reportSkew(skew, off)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// clockSkew is how far this host's clock is ahead of the database's
// (negative: behind); false when it cannot tell.
func (c *Runtime) clockSkew(ctx context.Context) (time.Duration, bool) {
	before := c.cfg.Now()
	db, err := c.drv.Exec().ClockNow(ctx)
	after := c.cfg.Now()
	if err != nil || db.IsZero() || after.Sub(before) > clockSlowRead {
		return 0, false
	}
	return before.Add(after.Sub(before) / 2).Sub(db), true
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
		c.log.Warn("this host's clock is "+way+" the database's: heartbeats and reaping compare the clocks of the "+
			"fleet's hosts, so a process whose clock lags the dispatcher's by more than ProcessDeadAfter minus a "+
			"HeartbeatInterval is reaped while alive (its jobs run twice) and one whose clock runs ahead is reaped late; "+
			"keep the hosts' clocks in sync (NTP)",
			"by", by.Round(time.Millisecond), "heartbeat_interval", c.cfg.HeartbeatInterval, "process_dead_after", c.cfg.ProcessDeadAfter)
	case !bad && off:
		c.log.Info("this host's clock agrees with the database's again", "skew", skew.Round(time.Millisecond))
	}
	return bad
}
