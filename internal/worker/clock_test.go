package worker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/dbclock"
	"github.com/bqueue/bq/internal/driver"
)

// clockDB is a driver whose server clock reads at.
type clockDB struct {
	driver.Driver
	at *time.Time
}

type clockExec struct {
	driver.Executor
	at *time.Time
}

func (d clockDB) Exec() driver.Executor { return clockExec{at: d.at} }
func (e clockExec) ClockNow(context.Context) (time.Time, error) {
	return *e.at, nil
}

// TestClockSkewWarned: a host whose clock differs from the database's by
// a HeartbeatInterval or more is warned about once, which way and by how
// much, and told when the clocks agree again; a smaller difference, or a
// database with no clock of its own (SQLite), says nothing. Every
// comparison corrects the runtime's clock (Config.Now) to the database's
// by more than dbclock.Tolerance; one with no clock leaves it as it was.
func TestClockSkewWarned(t *testing.T) {
	ctx := context.Background()
	host := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	var db time.Time
	var buf bytes.Buffer
	defer func(old func() time.Time) { dbclock.HostNow = old }(dbclock.HostNow)
	dbclock.HostNow = func() time.Time { return host }
	clock := dbclock.New()
	c := &Runtime{drv: clockDB{at: &db}, cfg: Config{Clock: clock, Now: clock.Now, HeartbeatInterval: 5 * time.Second,
		ProcessDeadAfter: 30 * time.Second}, log: slog.New(slog.NewTextHandler(&buf, nil))}
	check := func(off bool) bool {
		t.Helper()
		if skew, ok := c.clockSkew(ctx); ok {
			return c.reportSkew(skew, off)
		}
		return off
	}
	off := false
	for _, step := range []struct {
		db   time.Time
		want time.Duration // the correction after it
	}{
		{time.Time{}, 0},                                 // no clock of its own
		{host.Add(30 * time.Millisecond), 0},             // within the tolerance: left alone
		{host.Add(2 * time.Second), 2 * time.Second},     // within a beat
		{host.Add(31 * time.Second), 31 * time.Second},   // the host lags by 31 s: warned
		{host.Add(40 * time.Second), 40 * time.Second},   // still off: not again
		{time.Time{}, 40 * time.Second},                  // no reading: kept
		{host.Add(-time.Second), -time.Second},           // agree again
		{host.Add(-12 * time.Second), -12 * time.Second}, // the host runs 12 s ahead
	} {
		db = step.db
		off = check(off)
		if got := clock.Offset(); got != step.want {
			t.Errorf("database at host%+v: correction %v, want %v", step.db.Sub(host), got, step.want)
		}
		if got := c.cfg.Now().Sub(host); got != step.want {
			t.Errorf("database at host%+v: the runtime's clock reads host%+v, want host%+v", step.db.Sub(host), got, step.want)
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want 3:\n%s", len(lines), buf.String())
	}
	for i, want := range [][]string{
		{"level=WARN", "clock is behind the database's", "by=31s", "follows the database's clock", "NTP"},
		{"level=INFO", "agrees with the database's again"},
		{"level=WARN", "clock is ahead of the database's", "by=12s"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i+1, lines[i], w)
			}
		}
	}
}
