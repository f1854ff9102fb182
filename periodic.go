package bq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/worker"
	"github.com/robfig/cron/v3"
)

// Missed says what a periodic job does with ticks that passed while no
// process ran its scheduler (a deploy, an outage): a tick is missed once it
// is more than ten scheduler checks late (10 s by default).
type Missed int

const (
	// EnqueueOnce enqueues one job on recovery for all the missed ticks,
	// never one per tick. The default.
	EnqueueOnce Missed = iota
	// SkipMissed enqueues nothing for missed ticks: the next job is the
	// next tick's.
	SkipMissed
)

func (m Missed) String() string {
	if m == SkipMissed {
		return "skip"
	}
	return "enqueue once"
}

// PeriodicOptions configures a periodic job. Zero values take the defaults.
type PeriodicOptions struct {
	// Name identifies the schedule across the fleet and in status
	// output, by the rule of queue names. Default: the job's name; give
	// one to run the same job on two schedules.
	Name string
	// RunOnStart makes the first tick at once when the schedule is new to
	// the database or its schedule changed, rather than at its next time.
	// It is not one job per process start: processes starting together
	// would enqueue one each.
	RunOnStart bool
	// Missed: EnqueueOnce (default) or SkipMissed.
	Missed Missed
}

// PeriodicJob is a job enqueued on a schedule; list it in Config.Periodic.
// Periodic returns it.
type PeriodicJob struct {
	name     string
	kind     string
	schedule Schedule
	opts     PeriodicOptions
	// build makes the tick's job row; it calls the user's args function.
	build func(ctx context.Context, c *Client, tick, now time.Time) ([]*driver.NewJob, error)
	err   error
}

// Periodic makes job enqueue on schedule, with the args that args returns
// for the tick (the tick's scheduled time, whatever the time it is
// enqueued). List it in Config.Periodic of the processes that run it:
//
//	var Nightly = bq.Periodic(bq.Cron("0 3 * * *", paris), Report,
//		func(tick time.Time) ReportArgs { return ReportArgs{Day: tick.Format(time.DateOnly)} },
//		bq.PeriodicOptions{})
//
// Each tick is enqueued once across the whole fleet, however many
// processes run it (docs/periodic.md), and goes through admission like
// any enqueue: a job with a key and Discard is not enqueued while the
// key's slots are taken. args runs outside bq's transactions and may run
// in several processes for one tick; only one result is enqueued.
//
// A bad schedule, a nil or invalid job or a nil args function makes the
// periodic job invalid: NewClient returns its error (also Err).
func Periodic[A any](schedule Schedule, job *Job[A], args func(tick time.Time) A, opts PeriodicOptions) *PeriodicJob {
	p := &PeriodicJob{schedule: schedule, opts: opts}
	if job != nil {
		p.kind = job.name
		p.name = job.name
	}
	if opts.Name != "" {
		p.name = opts.Name
	}
	var errs []error
	if schedule.next == nil && schedule.err == nil {
		errs = append(errs, errors.New("the schedule is empty: pass bq.Every(d) or bq.Cron(expr, loc)"))
	}
	errs = append(errs, schedule.err)
	switch {
	case job == nil:
		errs = append(errs, errors.New("the job is nil: pass the *bq.Job that bq.Define returned"))
	case job.err != nil:
		errs = append(errs, fmt.Errorf("its job is invalid: %w", job.err))
	}
	if args == nil {
		errs = append(errs, errors.New("the args function is nil: pass func(tick time.Time) A returning each tick's args"))
	}
	if err := validateQueue(p.name); err != nil {
		errs = append(errs, fmt.Errorf("PeriodicOptions.Name: %w", err))
	}
	if opts.Missed != EnqueueOnce && opts.Missed != SkipMissed {
		errs = append(errs, fmt.Errorf("PeriodicOptions.Missed is %d: use bq.EnqueueOnce or bq.SkipMissed", opts.Missed))
	}
	if err := errors.Join(errs...); err != nil {
		p.err = fmt.Errorf("%w: bq.Periodic %q: %w", ErrInvalidJob, p.name, err)
		return p
	}
	p.build = func(ctx context.Context, c *Client, tick, now time.Time) (jobs []*driver.NewJob, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("the args function panicked: %v", r)
			}
		}()
		j, err := job.newJob(ctx, c, args(tick), &enqueueOptions{}, now)
		if err != nil {
			return nil, err
		}
		return []*driver.NewJob{j}, nil
	}
	return p
}

// Name is the periodic job's name.
func (p *PeriodicJob) Name() string { return p.name }

// Err is why the periodic job is invalid, or nil.
func (p *PeriodicJob) Err() error { return p.err }

// validatePeriodic checks Config.Periodic: each valid, names unique.
func validatePeriodic(list []*PeriodicJob) error {
	var errs []error
	seen := map[string]bool{}
	for i, p := range list {
		switch {
		case p == nil:
			errs = append(errs, fmt.Errorf("Config.Periodic[%d] is nil: list what bq.Periodic returns", i))
		case p.err != nil:
			errs = append(errs, fmt.Errorf("Config.Periodic[%d]: %w", i, p.err))
		case seen[p.name]:
			errs = append(errs, fmt.Errorf("Config.Periodic: two periodic jobs are named %q: give each its own PeriodicOptions.Name", p.name))
		}
		if p != nil {
			seen[p.name] = true
		}
	}
	return errors.Join(errs...)
}

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

// PeriodicStatus is one schedule the fleet runs, as the database holds it.
type PeriodicStatus struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Schedule string `json:"schedule"`
	// NextRunAt is the next tick.
	NextRunAt time.Time `json:"next_run_at"`
	// LastRunAt is the last tick enqueued (its scheduled time); nil before the first.
	LastRunAt *time.Time `json:"last_run_at,omitempty"`
	// LastJobID is its job, 0 when it was discarded (LastState says so).
	LastJobID int64 `json:"last_job_id,omitzero"`
	// LastState is what admission made of that job at its tick: ready,
	// blocked, scheduled, or discarded (no job stored). It stays as it
	// was at enqueue; LastJobState is where the job is now.
	LastState JobState `json:"last_state,omitempty"`
	// LastJobState is the last job's state as this status was read
	// (running, completed, failed, ...): "" when no job was stored
	// (discarded) or the job is gone (retention deleted it).
	LastJobState JobState `json:"last_job_state,omitempty"`
	// SeenAt is when a live process with the schedule in its code last
	// said so. A schedule no process has said so for ProcessDeadAfter was
	// removed from the code: no process ticks it, and it is pruned.
	SeenAt time.Time `json:"seen_at"`
	// Stale: no live process has it any more; it is about to be pruned.
	Stale bool `json:"stale,omitzero"`
}

// periodicStatus is the public face of the stored schedules, each last
// job's state read now: the stored one is the state at enqueue, which an
// operator would read as stuck (a job ready an hour ago has long run).
func (c *Client) periodicStatus(ctx context.Context, ex driver.Executor, rows []driver.Periodic, now time.Time) ([]PeriodicStatus, error) {
	out := make([]PeriodicStatus, len(rows))
	for i, r := range rows {
		out[i] = PeriodicStatus{Name: r.Name, Kind: r.Kind, Schedule: r.Schedule, NextRunAt: r.NextRunAt,
			LastRunAt: r.LastRunAt, LastJobID: r.LastJobID, LastState: JobState(r.LastState), SeenAt: r.SeenAt,
			Stale: now.Sub(r.SeenAt) >= c.cfg.ProcessDeadAfter}
		if r.LastJobID == 0 {
			continue
		}
		info, ok, err := ex.JobGet(ctx, r.LastJobID)
		if err != nil {
			return nil, fmt.Errorf("periodic job %q: its last job %d: %w", r.Name, r.LastJobID, err)
		}
		if ok {
			out[i].LastJobState = JobState(info.State)
		}
	}
	return out, nil
}

// periodic is a PeriodicJob as the runtime's scheduler sees it.
type periodic struct {
	p *PeriodicJob
	c *Client
}

func (c *Client) periodics() []worker.Periodic {
	out := make([]worker.Periodic, len(c.cfg.Periodic))
	for i, p := range c.cfg.Periodic {
		out[i] = periodic{p, c}
	}
	return out
}

func (p periodic) Name() string               { return p.p.name }
func (p periodic) Kind() string               { return p.p.kind }
func (p periodic) Spec() string               { return p.p.schedule.spec }
func (p periodic) Next(t time.Time) time.Time { return p.p.schedule.Next(t) }
func (p periodic) CatchUp() bool              { return p.p.opts.Missed == EnqueueOnce }
func (p periodic) First(now time.Time) time.Time {
	if p.p.opts.RunOnStart {
		return now.Truncate(time.Microsecond)
	}
	return p.p.schedule.Next(now)
}

func (p periodic) Build(ctx context.Context, tick, now time.Time) ([]*driver.NewJob, error) {
	return p.p.build(ctx, p.c, tick, now)
}

// PeriodicJobs lists the schedules the fleet runs, as stored: the
// periodic jobs of every process's Config.Periodic, ordered by name.
func (c *Client) PeriodicJobs(ctx context.Context) ([]PeriodicStatus, error) {
	rows, err := c.drv.Exec().PeriodicList(ctx)
	if err != nil {
		return nil, fmt.Errorf("periodic jobs: %w", c.explainErr(ctx, err))
	}
	ps, err := c.periodicStatus(ctx, c.drv.Exec(), rows, c.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("periodic jobs: %w", c.explainErr(ctx, err))
	}
	return ps, nil
}

// bq's conformance suite runs a client's scheduler pass by pass.
func init() {
	driver.PeriodicPass = func(ctx context.Context, client any) error {
		s := client.(*Client).sched
		if s == nil {
			return errors.New("the client has no Config.Periodic")
		}
		return s.Pass(ctx)
	}
}
