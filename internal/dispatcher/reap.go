package dispatcher

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

// reapClaims returns the claims of dead processes to ready (keeping
// their slots) or fails them once their attempts are spent. A process is
// dead only on evidence (driver package doc): silent for longer than
// ProcessDeadAfter and its own bound while others' heartbeats landed, so
// an outage or a locked database every process shared kills none.
func (d *Dispatcher) reapClaims(ctx context.Context, beats []driver.ProcessBeat, read bool) error {
	if look, err := d.mayHaveReapable(ctx, beats, read); err != nil || !look {
		return err
	}
	// Look first: most passes find nothing to reap.
	var lost []*driver.Claim
	err := driver.Atomic(ctx, d.drv, func(ex driver.Executor) (err error) {
		lost, err = ex.ClaimListReapable(ctx, d.cfg.Now(), d.cfg.ProcessDeadAfter, 1)
		return err
	})
	if err != nil || len(lost) == 0 {
		return err
	}
	for {
		var claims []*driver.Claim
		var reaped []reap
		err := d.inTx(ctx, func(ex driver.Executor) error {
			now := d.cfg.Now()
			var err error
			claims, err = ex.ClaimListReapable(ctx, now, d.cfg.ProcessDeadAfter, d.cfg.BatchSize)
			if err != nil {
				return err
			}
			reaped, err = handleLost(ctx, ex, claims, now)
			return err
		})
		if err != nil {
			return err
		}
		d.reaped(ctx, reaped)
		if len(claims) < d.cfg.BatchSize || ctx.Err() != nil {
			break
		}
	}
	// Remove the dead processes now their claims are gone: if one was only
	// paused, its next heartbeat finds no row and it cancels its runs.
	return d.deleteDeadProcesses(ctx)
}

// mayHaveReapable tells whether a pass must look through the claims for
// lost ones. A claim is lost when its process is dead or its process row
// is gone, and the process rows (a small table) show both: death needs a
// silence past ProcessDeadAfter, and a row gone since the last pass is
// missing from them. Only a row that came and went between two passes
// is not seen so, and for it every claim is looked through once per
// ProcessDeadAfter. The look walks the claims' key, which a busy queue
// fills with the entries of deleted claims: made by every process of a
// fleet every DispatchInterval, it cost more of the server's time than
// any other statement of a pass (bench/matrix/notes.md, "Fleet").
//
// beats are the process rows the pass's look read (PassLook), when read;
// otherwise they are read here, outside a transaction: on MySQL and
// SQLite a transaction would add its BEGIN and COMMIT to every pass of
// every process.
func (d *Dispatcher) mayHaveReapable(ctx context.Context, beats []driver.ProcessBeat, read bool) (bool, error) {
	if !read {
		procs, err := d.drv.Exec().ProcessList(ctx)
		if err != nil {
			return false, err
		}
		for _, p := range procs {
			beats = append(beats, driver.ProcessBeat{ID: p.ID, LastHeartbeatAt: p.LastHeartbeatAt})
		}
	}
	now := d.cfg.Now()
	look := now.Sub(d.lookedForReapable) >= d.cfg.ProcessDeadAfter || now.Before(d.lookedForReapable)
	seen := make(map[int64]bool, len(beats))
	for _, p := range beats {
		seen[p.ID] = true
		// Silent for ProcessDeadAfter is needed, not enough: the look
		// decides (each process's own DeadAfter, evidence that others
		// beat, beacons).
		look = look || now.Sub(p.LastHeartbeatAt) >= d.cfg.ProcessDeadAfter
	}
	for id := range d.seen {
		look = look || !seen[id]
	}
	d.seen = seen
	if look {
		d.lookedForReapable = now
	}
	return look, nil
}

// deleteDeadProcesses removes dead processes that hold no claims.
func (d *Dispatcher) deleteDeadProcesses(ctx context.Context) error {
	return driver.Atomic(ctx, d.drv, func(ex driver.Executor) error {
		_, err := ex.ProcessDeleteDead(ctx, d.cfg.Now(), d.cfg.ProcessDeadAfter)
		return err
	})
}

// reap is one claim reaped, told once its transaction commits.
type reap struct {
	claim  *driver.Claim
	result lifecycle.Result
}

func handleLost(ctx context.Context, ex driver.Executor, claims []*driver.Claim, now time.Time) ([]reap, error) {
	// A claim that fails (its attempts spent) or is cancelled releases its
	// keys' semaphores; one going back to ready keeps its slots and locks
	// none. Every blocking lock comes first, in key order: the keys of the
	// releasing single-key claims. A releasing multi-key claim's keys are
	// only try-locked after them (a release's promotion try-locks too);
	// one another transaction holds is left for the next pass.
	slices.SortFunc(claims, func(a, b *driver.Claim) int { return strings.Compare(a.Limit.Key, b.Limit.Key) })
	var todo, multi []*driver.Claim
	for _, c := range claims {
		releases, err := releasesOnReap(ctx, ex, c)
		if err != nil {
			return nil, err
		}
		switch {
		case !releases || c.Limit.Key == "":
		case len(c.More) > 0:
			multi = append(multi, c)
			continue
		default:
			if _, _, err := ex.SemaphoreLock(ctx, c.Limit.Key, ""); err != nil {
				return nil, err
			}
		}
		todo = append(todo, c)
	}
	for _, c := range multi {
		held, err := tryLockKeys(ctx, ex, c.Keys())
		if err != nil {
			return nil, err
		}
		if held {
			todo = append(todo, c)
		}
	}
	out := make([]reap, 0, len(todo))
	for _, c := range todo {
		r, err := lifecycle.Reap(ctx, ex, c, lifecycle.ReapMessage, now)
		if err != nil {
			return nil, err
		}
		if r.Matched {
			out = append(out, reap{c, r})
		}
	}
	return out, nil
}

// releasesOnReap reports whether reaping c releases its slots: its
// attempts are spent, or a cancel was asked for (lifecycle.Reap).
func releasesOnReap(ctx context.Context, ex driver.Executor, c *driver.Claim) (bool, error) {
	if c.Limit.Key == "" || c.Attempt+1 >= c.MaxAttempts {
		return c.Limit.Key != "", nil
	}
	return ex.ClaimCancelRequested(ctx, c.ID, c.Fence)
}

// tryLockKeys try-locks the semaphores of limits; false when another
// transaction holds one. A missing one needs no lock: nothing to release.
func tryLockKeys(ctx context.Context, ex driver.Executor, limits []driver.Limit) (bool, error) {
	for _, l := range limits {
		ok, err := ex.SemaphoreTryLock(ctx, l.Key)
		if err != nil {
			return false, err
		}
		if ok {
			continue
		}
		if _, exists, err := ex.SemaphoreGet(ctx, l.Key); err != nil || exists {
			return false, err
		}
	}
	return true, nil
}

// reaped logs, counts and wakes workers for claims reaped in a committed
// transaction.
func (d *Dispatcher) reaped(ctx context.Context, reaped []reap) {
	for _, r := range reaped {
		c := r.claim
		log := d.cfg.Logger.Warn
		msg := "reaped the claim of a lost process: the job is ready again, its attempt counted"
		switch r.result.State {
		case driver.StateFailed:
			log = d.cfg.Logger.Error
			msg = "reaped the claim of a lost process: its attempts are spent, the job failed"
		case driver.StateCancelled:
			msg = "reaped the claim of a lost process: a cancel was requested, the job is cancelled and its slot released"
		}
		log(msg, "job_id", c.ID, "kind", c.Kind, "queue", c.Queue, driver.LogKey(c.Limit.Key),
			"attempt", c.Attempt+1, "max_attempts", c.MaxAttempts)
		d.cfg.Hooks.reaped(ctx, c, r.result.State)
		d.logPromoted(ctx, c.Limit.Key, r.result.Promoted)
		// Reaped jobs are ready again; a failed one's released slot may
		// have promoted a job of another queue (logPromoted wakes it).
		if r.result.State == driver.StateReady {
			d.notify([]string{c.Queue})
		}
	}
}
