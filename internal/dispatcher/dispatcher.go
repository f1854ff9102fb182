// Package dispatcher runs bq's background maintenance: it admits due
// scheduled jobs, returns the claims of dead processes, keeps semaphores
// honest (recounts expired ones, promotes blocked jobs beside free slots),
// clears finished jobs and records the queue's history minute by minute.
// It needs no job code, so it runs embedded in a worker (client.Run) or
// alone (`bq dispatcher`). Several dispatchers may run at once: every
// step locks what it changes and skips what another holds.
package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/semaphore"
)

// Config tunes a Dispatcher. Zero values take the defaults.
type Config struct {
	// Interval between maintenance passes. Default 1s.
	Interval time.Duration
	// BatchSize bounds the rows one transaction touches. Default 500.
	BatchSize int
	// ProcessDeadAfter is the heartbeat silence after which a process is
	// dead and its claims are reaped. Default 30s.
	ProcessDeadAfter time.Duration
	// Retention keeps finished jobs this long; negative means they were
	// deleted at completion. Default 24h.
	Retention time.Duration
	// CleanupInterval between clean-up passes. Default 1m.
	CleanupInterval time.Duration
	// OnReady is told of queues that got ready jobs (to wake local workers).
	OnReady func(queue string)
	// RateWake, when it delivers, makes the dispatcher look at the rate
	// lines now: a job of this process went to one.
	RateWake <-chan struct{}
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Hooks are told what each pass did, for metrics.
	Hooks Hooks
	// PassFailed, when set, is told of a failed pass instead of the
	// logger, and PassOK of one that succeeded: the embedding client logs
	// an outage once rather than every pass.
	PassFailed func(err error)
	PassOK     func()
}

func (c Config) withDefaults() Config {
	c.Interval = cmp.Or(c.Interval, time.Second)
	c.BatchSize = cmp.Or(c.BatchSize, 500)
	c.ProcessDeadAfter = cmp.Or(c.ProcessDeadAfter, 30*time.Second)
	c.Retention = cmp.Or(c.Retention, 24*time.Hour)
	c.CleanupInterval = cmp.Or(c.CleanupInterval, time.Minute)
	if c.OnReady == nil {
		c.OnReady = func(string) {}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Logger = c.Logger.With("service", "dispatcher")
	return c
}

// Dispatcher is one maintenance loop.
type Dispatcher struct {
	drv         driver.Driver
	cfg         Config
	lastCleanup time.Time
	snapped     time.Time // the last minute of history this dispatcher snapshotted
	// lookedForReapable is when this dispatcher last looked through every
	// claim for lost ones; seen holds the process rows its last pass read
	// (see mayHaveLostClaims).
	lookedForReapable time.Time
	seen              map[int64]bool
}

// New returns a dispatcher for drv.
func New(drv driver.Driver, cfg Config) *Dispatcher {
	return &Dispatcher{drv: drv, cfg: cfg.withDefaults()}
}

// Run passes every Interval until ctx ends, and returns nil then. A failed
// pass is logged and retried at the next tick.
func (d *Dispatcher) Run(ctx context.Context) error {
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	rates := make(chan struct{})
	go func() {
		defer close(rates)
		d.rateLoop(ctx)
	}()
	defer func() { <-rates }()
	for {
		switch err := d.Pass(ctx); {
		case err != nil && ctx.Err() == nil && d.cfg.PassFailed != nil:
			d.cfg.PassFailed(err)
		case err != nil && ctx.Err() == nil:
			d.cfg.Logger.Error("maintenance pass failed", "error", err)
		case err == nil && d.cfg.PassOK != nil:
			d.cfg.PassOK()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass runs every maintenance step once. One read first says which
// steps have work (PassLook): most passes of most processes of a fleet
// find none, and each step's own look was a statement a pass.
func (d *Dispatcher) Pass(ctx context.Context) error {
	look, lookErr := d.drv.Exec().PassLook(ctx, d.cfg.Now())
	if lookErr != nil {
		// Every step then runs, and finds what work there is itself;
		// the reaper reads the processes itself (Beats nil).
		look = driver.PassWork{ScheduledDue: true, SemaphoresExpired: true, SemaphoresPromotable: true, DependenciesEnded: true}
	}
	step := func(has bool, run func(context.Context) error) error {
		if !has {
			return nil
		}
		return run(ctx)
	}
	errs := []error{
		lookErr,
		step(look.ScheduledDue, d.admitDue),
		d.reapClaims(ctx, look.Beats, lookErr == nil),
		step(look.SemaphoresExpired, d.reclaimExpired),
		step(look.SemaphoresPromotable, d.promoteBlocked),
		step(look.DependenciesEnded, d.settleEnded),
		d.snapshotHistory(ctx),
	}
	if now := d.cfg.Now(); now.Sub(d.lastCleanup) >= d.cfg.CleanupInterval {
		d.lastCleanup = now
		errs = append(errs, d.cleanup(ctx))
	}
	return errors.Join(errs...)
}

func (d *Dispatcher) inTx(ctx context.Context, fn func(ex driver.Executor) error) error {
	return driver.InTx(ctx, d.drv, fn)
}

// settleEnded settles the jobs that ended with jobs still waiting for
// them: a completion whose settling was left to a transaction of its own
// that never ran (its process died between the two).
func (d *Dispatcher) settleEnded(ctx context.Context) error {
	// Run only when the pass's look found such a job: there is almost
	// never any.
	var woken driver.Promotion
	var n int
	err := d.inTx(ctx, func(ex driver.Executor) (err error) {
		n, woken, err = lifecycle.SettleEnded(ctx, ex, d.cfg.BatchSize, d.cfg.Now())
		return err
	})
	if err != nil {
		return err
	}
	if n > 0 {
		d.cfg.Logger.Info("settled the jobs waiting for jobs that ended", "ended", n)
	}
	d.notify(woken.Queues)
	return nil
}

// admitDue admits due scheduled jobs, a batch per transaction.
func (d *Dispatcher) admitDue(ctx context.Context) error {
	// Run only when the pass's look found one due: most passes find none.
	for {
		var jobs []*driver.Job
		var states []driver.JobState
		var woken driver.Promotion
		err := d.inTx(ctx, func(ex driver.Executor) (err error) {
			jobs, states, woken, err = lifecycle.AdmitDue(ctx, ex, d.cfg.BatchSize, d.cfg.Now())
			return err
		})
		if err != nil {
			return err
		}
		for i, j := range jobs {
			state := states[i]
			if state == driver.StateReady {
				woken.AddQueue(j.Queue)
			}
			d.cfg.Logger.Debug("scheduled job due: "+string(state), "job_id", j.ID, "kind", j.Kind,
				"queue", j.Queue, driver.LogKey(j.Limit.Key), "state", state)
			d.cfg.Hooks.admitted(ctx, j, state)
		}
		d.notify(woken.Queues)
		if len(jobs) < d.cfg.BatchSize || ctx.Err() != nil {
			return nil
		}
	}
}

// logPromoted logs, counts and wakes the workers of blocked jobs of key
// promoted in a committed transaction.
func (d *Dispatcher) logPromoted(ctx context.Context, key string, p driver.Promotion) {
	if p.Jobs <= 0 {
		return
	}
	d.cfg.Logger.Debug("promoted blocked jobs", "key", key, "count", p.Jobs)
	d.cfg.Hooks.promoted(ctx, key, p.Jobs)
	d.notify(p.Queues)
}

// reclaimExpired recounts semaphores whose expiry passed. Live holders
// renew expiry through their process's heartbeat, so an expired semaphore
// has no live running holder: claims of its key whose process is dead for
// the key's Duration are reaped, then its slots are recounted. A key
// another transaction holds is skipped (its holder releases and promotes
// it), so a frozen holder never stalls the pass; a key that fails does
// not stop the others.
func (d *Dispatcher) reclaimExpired(ctx context.Context) error {
	var errs []error
	after := ""
	for {
		keys, err := d.drv.Exec().SemaphoreListExpired(ctx, d.cfg.Now(), after, d.cfg.BatchSize)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		for _, key := range keys {
			var reaped []reap
			var promoted driver.Promotion
			err := d.inTx(ctx, func(ex driver.Executor) error {
				reaped, promoted = nil, driver.Promotion{}
				now := d.cfg.Now()
				if ok, err := ex.SemaphoreTryLock(ctx, key); err != nil || !ok {
					return err
				}
				s, ok, err := ex.SemaphoreLock(ctx, key, "")
				if err != nil || !ok || s.ExpiresAt.After(now) {
					return err
				}
				lost, err := ex.ClaimListReapableOfKey(ctx, key, now, s.Duration)
				if err != nil {
					return err
				}
				if reaped, err = handleLost(ctx, ex, lost, now); err != nil {
					return err
				}
				promoted, err = semaphore.Reclaim(ctx, ex, key, now)
				return err
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("recount semaphore %q: %w", key, err))
				continue
			}
			d.reaped(ctx, reaped)
			if promoted.Jobs > 0 {
				d.cfg.Logger.Debug("recounted expired semaphore", "key", key)
				d.logPromoted(ctx, key, promoted)
			}
		}
		if len(keys) < d.cfg.BatchSize || ctx.Err() != nil {
			return errors.Join(errs...)
		}
		after = keys[len(keys)-1]
	}
}

// promoteBlocked hands free slots to blocked jobs, min(free, blocked) per
// key, paging through keys so no key is starved by a LIMIT. Keys another
// transaction holds are skipped, as in recountExpired.
func (d *Dispatcher) promoteBlocked(ctx context.Context) error {
	var errs []error
	after := ""
	for {
		keys, err := d.drv.Exec().SemaphoreListPromotable(ctx, after, d.cfg.BatchSize)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		for _, key := range keys {
			var promoted driver.Promotion
			err := d.inTx(ctx, func(ex driver.Executor) (err error) {
				promoted = driver.Promotion{}
				if ok, err := ex.SemaphoreTryLock(ctx, key); err != nil || !ok {
					return err
				}
				promoted, err = semaphore.Promote(ctx, ex, key, d.cfg.Now())
				return err
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("promote blocked jobs of %q: %w", key, err))
				continue
			}
			d.logPromoted(ctx, key, promoted)
		}
		if len(keys) < d.cfg.BatchSize || ctx.Err() != nil {
			return errors.Join(errs...)
		}
		after = keys[len(keys)-1]
	}
}

// cleanup deletes finished jobs past retention, idle semaphores, dead
// processes that hold nothing and history past a day.
func (d *Dispatcher) cleanup(ctx context.Context) error {
	now := d.cfg.Now()
	var errs []error
	if d.cfg.Retention > 0 {
		for {
			var n int
			err := driver.Atomic(ctx, d.drv, func(ex driver.Executor) (err error) {
				n, err = ex.JobDeleteFinished(ctx, now.Add(-d.cfg.Retention), d.cfg.BatchSize)
				return err
			})
			if err != nil {
				errs = append(errs, err)
				break
			}
			if n < d.cfg.BatchSize || ctx.Err() != nil {
				break
			}
		}
	}
	errs = append(errs, driver.Atomic(ctx, d.drv, func(ex driver.Executor) error {
		_, err := ex.SemaphoreDeleteIdle(ctx, now, d.cfg.BatchSize)
		return err
	}))
	errs = append(errs, d.deleteDecidedInbox(ctx))
	errs = append(errs, d.recountRates(ctx))
	errs = append(errs, driver.Atomic(ctx, d.drv, func(ex driver.Executor) error {
		_, err := ex.RateDeleteIdle(ctx, now, d.cfg.BatchSize)
		return err
	}))
	errs = append(errs, d.deleteDeadProcesses(ctx))
	errs = append(errs, d.pruneHistory(ctx, now))
	return errors.Join(errs...)
}

// inboxKeep is how long a decided inbox row stays, for its client to
// read its outcome, when finished jobs are deleted at once (NoRetention).
const inboxKeep = time.Hour

// deleteDecidedInbox deletes the inbox rows decided longer ago than the
// retention of finished jobs (inboxKeep without one), a batch at a time.
func (d *Dispatcher) deleteDecidedInbox(ctx context.Context) error {
	age := d.cfg.Retention
	if age <= 0 {
		age = inboxKeep
	}
	for {
		var n int
		err := driver.Atomic(ctx, d.drv, func(ex driver.Executor) (err error) {
			n, err = ex.InboxDeleteDecided(ctx, age, d.cfg.BatchSize)
			return err
		})
		if err != nil || n < d.cfg.BatchSize || ctx.Err() != nil {
			return err
		}
	}
}

// notify tells OnReady of queues that got ready jobs.
func (d *Dispatcher) notify(queues []string) {
	for _, q := range queues {
		d.cfg.OnReady(q)
	}
}
