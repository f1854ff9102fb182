package dispatcher

import (
	"context"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

// Rate lines move on time, not on completions: a slot of a rate key's
// ring frees one period after its start. rateLoop wakes when the earliest
// waiting key's next slot frees (RateNextAt), or when this process put a
// job in a line (RateWake), and looks at least every ratePoll for lines
// other processes filled.
const (
	ratePoll = 250 * time.Millisecond
	// rateCoalesce is the least time between two looks: slots freeing
	// within it are promoted together.
	rateCoalesce = 5 * time.Millisecond
	// repairEvery bounds how often one key's reservations are checked
	// for jobs that will never start on them.
	repairEvery = time.Second
)

func (d *Dispatcher) rateLoop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	repaired := map[string]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-d.cfg.RateWake:
		}
		wait, err := d.promoteRates(ctx, repaired)
		if err != nil && ctx.Err() == nil {
			if d.cfg.PassFailed != nil {
				d.cfg.PassFailed(err)
			} else {
				d.cfg.Logger.Error("rate promotion failed", "error", err)
			}
			wait = ratePoll
		}
		timer.Reset(wait)
	}
}

// promoteRates makes ready the jobs of every due rate line that free
// slots allow, and returns how long to wait before looking again.
func (d *Dispatcher) promoteRates(ctx context.Context, repaired map[string]time.Time) (time.Duration, error) {
	now := d.cfg.Now()
	due, err := d.drv.Exec().RateListDue(ctx, now, d.cfg.BatchSize)
	if err != nil {
		return 0, err
	}
	for _, key := range due.Keys {
		repair := now.Sub(repaired[key]) >= repairEvery
		if repair {
			repaired[key] = now
		}
		var p driver.Promotion
		if err := d.inTx(ctx, func(ex driver.Executor) (err error) {
			p, err = lifecycle.PromoteRate(ctx, ex, key, repair, now)
			return err
		}); err != nil {
			return 0, err
		}
		d.notify(p.Queues)
	}
	for key, at := range repaired {
		if now.Sub(at) > time.Minute {
			delete(repaired, key)
		}
	}
	// With none due, the read said when the next key is: most looks of
	// most processes find nothing, and a second read was a statement
	// each. After promotions the keys' NextAt moved: read it again.
	next, ok := due.Later, due.LaterOK
	if len(due.Keys) > 0 {
		if next, ok, err = d.drv.Exec().RateNextAt(ctx); err != nil {
			return ratePoll, err
		}
	}
	if !ok {
		return ratePoll, nil
	}
	return min(max(next.Sub(d.cfg.Now()), rateCoalesce), ratePoll), nil
}

// recountRates recounts the lines whose row counts no job waiting while
// they hold some: nothing should make such a count drift, and if
// something did, its jobs would wait for ever.
func (d *Dispatcher) recountRates(ctx context.Context) error {
	keys, err := d.drv.Exec().RateListStrayLines(ctx, d.cfg.BatchSize)
	if err != nil || len(keys) == 0 {
		return err
	}
	for _, key := range keys {
		var n int
		var p driver.Promotion
		if err := d.inTx(ctx, func(ex driver.Executor) (err error) {
			n, p, err = lifecycle.RecountRate(ctx, ex, key, d.cfg.Now())
			return err
		}); err != nil {
			return err
		}
		if n > 0 {
			d.cfg.Logger.Warn("a rate key's row counted no job waiting while its line held some; recounted",
				"waiting", n, "promoted", p.Jobs)
		}
		d.notify(p.Queues)
	}
	return nil
}
