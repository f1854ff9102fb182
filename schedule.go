package bq

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule says when a periodic job's ticks fall: Every(d) or Cron(expr,
// loc). Every process of a fleet computes the same ticks from it, so a
// schedule never depends on the process's clock zone or start time.
type Schedule struct {
	spec string // as stored and shown: "@every 1m0s", "CRON_TZ=UTC 0 3 * * *"
	next func(after time.Time) time.Time
	err  error
}

// String is the schedule as bq stores and shows it.
func (s Schedule) String() string { return s.spec }

// Next returns the first tick after t (the zero time for a schedule that
// does not parse).
func (s Schedule) Next(t time.Time) time.Time {
	if s.next == nil {
		return time.Time{}
	}
	// Stored times keep microseconds: a tick must read back as written,
	// since it is the tick's identity.
	return s.next(t).Truncate(time.Microsecond)
}

// Every ticks each d, at the multiples of d since the Unix epoch (Every(time.Hour)
// ticks on the hour, UTC), so every process computes the same ticks. d is
// at least one second.
func Every(d time.Duration) Schedule {
	spec := "@every " + d.String()
	if d < time.Second {
		return Schedule{spec: spec, err: fmt.Errorf("bq.Every(%s): the interval is under one second: use 1s or more (the scheduler checks about once a second)", d)}
	}
	return Schedule{spec: spec, next: func(t time.Time) time.Time {
		n := t.UnixNano()
		return time.Unix(0, n-n%int64(d)+int64(d)).UTC()
	}}
}

// cronParser reads the standard five fields (minute, hour, day of month,
// month, day of week), their ranges, lists and steps, the descriptors
// (@daily, @hourly, ...) and a CRON_TZ= or TZ= prefix.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Cron ticks on a standard five-field cron expression ("0 3 * * *": at
// 03:00 every day), in loc; a nil loc means the expression's own
// CRON_TZ=Zone prefix, else UTC. Around a daylight-saving change ticks
// follow github.com/robfig/cron/v3: a wall time the clocks skip does not
// fire that day, one they repeat fires twice (docs/periodic.md).
//
// An expression that does not parse, or never fires, makes the schedule
// invalid: Periodic and NewClient return the error.
func Cron(expr string, loc *time.Location) Schedule {
	expr = strings.TrimSpace(expr)
	zoned := strings.HasPrefix(expr, "CRON_TZ=") || strings.HasPrefix(expr, "TZ=")
	// Errors quote the expression as written, not with the CRON_TZ=
	// prefix added below for the zone.
	written := expr
	bad := func(format string, args ...any) Schedule {
		return Schedule{spec: written, err: fmt.Errorf("bq.Cron(%q): "+format, append([]any{written}, args...)...)}
	}
	switch {
	case loc == time.Local:
		return bad("time.Local is each process's own zone, so a fleet would disagree on the ticks: name the zone, e.g. time.LoadLocation(%q)", "Europe/Paris")
	case loc != nil && zoned:
		return bad("the expression names its zone and loc is %s too: give one of them", loc)
	case strings.HasPrefix(expr, "@every"):
		return bad("@every is an interval: use bq.Every(d)")
	case loc != nil:
		expr = "CRON_TZ=" + loc.String() + " " + expr
	case !zoned:
		expr = "CRON_TZ=UTC " + expr
	}
	sched, err := cronParser.Parse(expr)
	if err != nil {
		return bad("%v: write five fields, minute hour day-of-month month day-of-week, e.g. \"0 3 * * *\" for 03:00 daily", err)
	}
	if sched.Next(time.Now()).IsZero() {
		return bad("it never fires (no matching time in the next five years): check the day of month against the month")
	}
	return Schedule{spec: expr, next: sched.Next}
}
