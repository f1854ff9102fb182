package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

// scheduler enqueues this process's periodic jobs on their ticks. Which
// process enqueues a tick is settled in the database, not here: each
// tick's row is moved on by one conditional UPDATE (PeriodicAdvance), in
// the transaction of the tick's enqueue, and the one that moves it wins.
type scheduler struct {
	c     *Runtime
	jobs  map[string]Periodic
	names []string // sorted: rows are locked in name order
	every time.Duration
	grace time.Duration // a tick later than this is missed

	enqueued func(ctx context.Context, jobs []*driver.NewJob, verdicts []lifecycle.Verdict, promoted driver.Promotion)

	out     outage     // failing passes, logged as one event
	mu      sync.Mutex // one pass at a time
	synced  time.Time  // the last sync of the rows; zero before the first
	aside   map[string]string
	started bool
}

// Periodic is one periodic job, as the scheduler needs it
// (bq.PeriodicJob).
type Periodic interface {
	Name() string
	Kind() string
	// Spec is the schedule as written; Next its first tick after t;
	// First the first tick of a schedule new to the database.
	Spec() string
	Next(t time.Time) time.Time
	First(now time.Time) time.Time
	// CatchUp: after missed ticks, enqueue one job for them all (else
	// skip those older than the grace).
	CatchUp() bool
	// Build makes the jobs of a tick: the application's code (the args
	// function, enqueue hooks), so it runs before bq's transaction.
	Build(ctx context.Context, tick, now time.Time) ([]*driver.NewJob, error)
}

// Scheduler returns the periodic scheduler of list, to run with
// RunOptions.Periodic (or pass by pass: Pass); nil for an empty list.
// enqueued is told of each tick's jobs, as an enqueue is.
func (c *Runtime) Scheduler(list []Periodic, enqueued func(ctx context.Context, jobs []*driver.NewJob, verdicts []lifecycle.Verdict, promoted driver.Promotion)) *Scheduler {
	if len(list) == 0 {
		return nil
	}
	s := &scheduler{c: c, jobs: map[string]Periodic{}, aside: map[string]string{},
		every: min(c.cfg.DispatchInterval, time.Second), enqueued: enqueued}
	s.grace = 10 * s.every
	for _, p := range list {
		s.jobs[p.Name()] = p
		s.names = append(s.names, p.Name())
	}
	slices.Sort(s.names)
	return &Scheduler{s}
}

// Scheduler enqueues a process's periodic jobs on their ticks.
type Scheduler struct{ s *scheduler }

// Run checks the schedules about once a second until ctx ends.
func (s *Scheduler) Run(ctx context.Context) { s.s.run(ctx) }

// Pass runs one pass of the scheduler (tests run it pass by pass).
func (s *Scheduler) Pass(ctx context.Context) error { return s.s.pass(ctx) }

// run checks the schedules about once a second until ctx ends.
func (s *scheduler) run(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		if err := s.pass(ctx); err != nil && ctx.Err() == nil {
			s.out.failed(s.c, "periodic scheduler", err)
		} else if err == nil {
			// A pass may have written nothing: it shows writes work
			// by this process's newest write.
			s.out.ok(s.c, "periodic scheduler", s.c.lastWrite())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass syncs this process's schedules into the database once a
// HeartbeatInterval, then enqueues the ticks that are due. A pass that
// finds nothing due costs one indexed read.
func (s *scheduler) pass(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.c.cfg.Now()
	if !s.started || now.Sub(s.synced) >= s.c.cfg.HeartbeatInterval || now.Before(s.synced) {
		if err := s.sync(ctx, now); err != nil {
			return err
		}
		s.synced, s.started = now, true
	}
	due, err := s.c.drv.Exec().PeriodicListDue(ctx, now)
	if err != nil {
		return fmt.Errorf("periodic jobs: %w", s.c.explainErr(ctx, err))
	}
	var errs []error
	for _, row := range due {
		p, ok := s.jobs[row.Name]
		if !ok || p.Kind() != row.Kind || p.Spec() != row.Schedule {
			continue // another deploy's schedule: its processes tick it
		}
		if err := s.tick(ctx, p, row, now); err != nil {
			errs = append(errs, fmt.Errorf("periodic job %q: %w", p.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// sync writes this process's schedules as desired state. A new schedule
// is inserted; one stored as this process has it is marked seen; one
// stored differently is taken over when this process starts (the newest
// deploy's definition wins) and left to the processes that have it
// otherwise. Rows no live process marked seen for ProcessDeadAfter are
// schedules removed from code, and are pruned; a process that still has
// one (an older deploy, once the newer is gone) stores it again at its
// next sync.
func (s *scheduler) sync(ctx context.Context, now time.Time) error {
	starting := !s.started
	err := driver.InTx(ctx, s.c.drv, func(ex driver.Executor) error {
		stored, err := ex.PeriodicLockMany(ctx, s.names)
		if err != nil {
			return err
		}
		byName := map[string]driver.Periodic{}
		for _, r := range stored {
			byName[r.Name] = r
		}
		for _, name := range s.names {
			p := s.jobs[name]
			want := driver.Periodic{Name: name, Kind: p.Kind(), Schedule: p.Spec(), NextRunAt: p.First(now), SeenAt: now}
			have, ok := byName[name]
			switch {
			case !ok:
				_, err = ex.PeriodicInsert(ctx, want) // false: another process inserted it meanwhile
			case have.Kind == want.Kind && have.Schedule == want.Schedule:
				delete(s.aside, name)
				if now.Sub(have.SeenAt) < s.c.cfg.HeartbeatInterval && !now.Before(have.SeenAt) {
					continue // another process marked it lately: one write a beat, not one a process
				}
				want.NextRunAt = have.NextRunAt
				err = ex.PeriodicUpdate(ctx, want)
			case starting:
				s.c.log.Info("periodic job: schedule changed", "periodic", name, "was", have.Kind+" "+have.Schedule,
					"now", want.Kind+" "+want.Schedule)
				err = ex.PeriodicUpdate(ctx, want)
				delete(s.aside, name)
			default:
				if s.aside[name] != have.Schedule {
					s.aside[name] = have.Schedule
					s.c.log.Warn("periodic job: live processes run another definition; this one leaves its ticks to them until they stop",
						"periodic", name, "stored", have.Kind+" "+have.Schedule, "here", want.Kind+" "+want.Schedule)
				}
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		// A statement of its own, holding no other row: two processes
		// locking their own schedules and pruning each other's would
		// deadlock.
		err = driver.Atomic(ctx, s.c.drv, func(ex driver.Executor) error {
			_, err := ex.PeriodicPrune(ctx, now.Add(-s.c.cfg.ProcessDeadAfter))
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("sync periodic jobs: %w", s.c.explainErr(ctx, err))
	}
	return nil
}

// maxCatchUp bounds the ticks one pass steps over to find the next one
// after a long outage (a week of a 1 s schedule).
const maxCatchUp = 1 << 20

// tick enqueues row's due tick, if this process wins it: the conditional
// UPDATE moving the row to its next tick and the enqueue commit together,
// so a tick is enqueued exactly once however many processes try.
func (s *scheduler) tick(ctx context.Context, p Periodic, row driver.Periodic, now time.Time) error {
	// The ticks due: row.NextRunAt and every later one up to now, of
	// which latest is the one a job is enqueued for.
	latest, next := row.NextRunAt, p.Next(row.NextRunAt)
	for n := 0; !next.After(now) && n < maxCatchUp; n++ {
		latest, next = next, p.Next(next)
	}
	if !next.After(now) {
		next = p.Next(now)
	}
	enqueue := p.CatchUp() || now.Sub(latest) <= s.grace
	var built, jobs []*driver.NewJob
	var buildErr error
	if enqueue {
		// User code, so before bq's transaction takes any lock.
		built, buildErr = p.Build(ctx, latest, now)
	}
	var verdicts []lifecycle.Verdict
	var promoted driver.Promotion
	won := false
	var refused error // a job lifecycle.Enqueue refused: no rate (ErrNoRate)
	err := driver.InTx(ctx, s.c.drv, func(ex driver.Executor) (err error) {
		verdicts, promoted, jobs, refused = nil, driver.Promotion{}, nil, nil
		won, err = ex.PeriodicAdvance(ctx, driver.AdvanceParams{Name: row.Name, Schedule: row.Schedule, Was: row.NextRunAt, Next: next})
		if err != nil || !won || built == nil {
			return err
		}
		for _, j := range built { // afresh each attempt: admission writes into them
			c := *j
			jobs = append(jobs, &c)
		}
		if verdicts, promoted, err = lifecycle.Admit(ctx, ex, jobs, now); errors.Is(err, lifecycle.ErrNoRate) {
			// Refused before any write: the tick is spent, as for bad args,
			// rather than failing every pass until a policy appears.
			refused, jobs = err, nil
			return nil
		} else if err != nil {
			return err
		}
		return ex.PeriodicSetLastRun(ctx, driver.PeriodicRunParams{Name: row.Name, At: latest, JobID: jobs[0].ID, State: verdicts[0].State})
	})
	switch {
	case err != nil:
		return s.c.explainErr(ctx, err)
	case !won:
		return nil // another process enqueued this tick
	case buildErr != nil:
		// The tick is spent: a broken args function would fail every pass.
		// Its error is the code's, not the database's: logged, not an outage.
		s.c.log.Error("periodic job: tick not enqueued: its args are invalid; fix the args function",
			"periodic", p.Name(), "tick", latest, "error", buildErr)
		return nil
	case refused != nil:
		s.c.log.Error("periodic job: tick not enqueued: its job has no rate; give it one or its queue a policy MaxStartsPerKey",
			"periodic", p.Name(), "tick", latest, "error", refused)
		return nil
	case jobs == nil:
		s.c.log.Debug("periodic job: missed ticks skipped", "periodic", p.Name(), "tick", latest, "next", next)
		return nil
	}
	s.enqueued(ctx, jobs, verdicts, promoted)
	s.c.log.Debug("periodic job enqueued", "periodic", p.Name(), "tick", latest, "job_id", jobs[0].ID,
		"state", verdicts[0].State, "next", next)
	return nil
}
