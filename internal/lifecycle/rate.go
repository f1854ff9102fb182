package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/ratelimit"
)

// Rate limits are checked twice. Admission (admitRates) makes a rated
// job ready only with a slot of its key's ring reserved for it, and
// otherwise puts it in the key's line, so a burst never floods ready with
// jobs that may not start. The claim (StartRated) is what counts: it
// turns the reservation, or else a free slot, into the start; a claimed
// job with neither goes back to the line unrun. Locks: semaphores before
// rate rows, rate rows in key order.

// rateAdmission is the rate stage of one admission: the windows it
// locked and the slots it chose for jobs whose ids may not exist yet.
type rateAdmission struct {
	windows map[string]*ratelimit.Window
	keys    []string
	reserve map[string][]*candidate // by key: the ready candidates, each with its slot
}

// admitRates sends each ready candidate with a rate key either on to
// ready, a slot reserved, or to its key's line (outcome blocked, line
// set). A key whose line is not empty takes no new job past it.
func admitRates(ctx context.Context, ex Store, cands []*candidate, now time.Time) (*rateAdmission, error) {
	ra := &rateAdmission{windows: map[string]*ratelimit.Window{}, reserve: map[string][]*candidate{}}
	byKey := map[string][]*candidate{}
	for _, c := range cands {
		if c != nil && c.outcome == driver.StateReady && c.rate.Key != "" {
			byKey[c.rate.Key] = append(byKey[c.rate.Key], c)
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		group := byKey[key]
		slices.SortStableFunc(group, func(a, b *candidate) int { return cmp.Compare(b.priority, a.priority) })
		last := group[len(group)-1]
		w, err := ratelimit.Lock(ctx, ex, last.rate, last.queue, now)
		if err != nil {
			return nil, err
		}
		if w == nil {
			// No rate at all (its policy's was removed, the key idle):
			// the jobs go to ready unrated.
			continue
		}
		ra.keys = append(ra.keys, key)
		ra.windows[key] = w
		var free []int
		if w.Waiting() == 0 {
			if free, err = w.Free(ctx, len(group)); err != nil {
				return nil, err
			}
		}
		for i, c := range group {
			if i < len(free) {
				c.slot = free[i]
				ra.reserve[key] = append(ra.reserve[key], c)
				continue
			}
			c.outcome, c.line = driver.StateBlocked, driver.RateLine(key)
			w.Wait(1)
		}
	}
	return ra, nil
}

// finish reserves the chosen slots for the candidates' jobs, now that
// they have ids, and saves every window.
func (ra *rateAdmission) finish(ctx context.Context, idOf func(*candidate) int64) error {
	for _, key := range ra.keys {
		w := ra.windows[key]
		var slots []int
		var ids []int64
		for _, c := range ra.reserve[key] {
			slots, ids = append(slots, c.slot), append(ids, idOf(c))
		}
		if err := w.Reserve(ctx, slots, ids); err != nil {
			return err
		}
		if err := w.Save(ctx); err != nil {
			return err
		}
	}
	return nil
}

// RateStart is what StartRated did with one claim.
type RateStart struct {
	// Run: the claim may run; it must begin by StartBy (zero for a job
	// with no rate key: no bound), Slack after its start's stamp, its
	// start stamped on Slot.
	Run     bool
	StartBy time.Time
	Slack   time.Duration
	Slot    int
}

// StartRated counts the starts of the claims that carry a rate key,
// each on its reservation or a free slot of its key, keys locked in
// order. A claim with neither goes back to its key's line, unrun and its
// attempt uncounted (a claim reaped meanwhile changes nothing). The
// starts are stamped last, at a clock read then, so the slack a run has
// to begin in is not spent on the transaction's own statements. It
// returns, per claim, whether to run it and by when, and what the keys'
// lines promoted into slots still free. lag is how late after their
// claims the process's rated runs lately began: the slack widens to
// cover it (ratelimit.Slack), so a slow process's runs begin rather
// than go back to the line again and again.
func StartRated(ctx context.Context, ex Store, claims []*driver.Claim, clock func() time.Time, lag time.Duration) ([]RateStart, driver.Promotion, error) {
	out := make([]RateStart, len(claims))
	byKey := map[string][]int{}
	for i, c := range claims {
		if c.Rate.Key == "" {
			out[i].Run = true
			continue
		}
		byKey[c.Rate.Key] = append(byKey[c.Rate.Key], i)
	}
	var promoted driver.Promotion
	if len(byKey) == 0 {
		return out, promoted, nil
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	windows := make([]*ratelimit.Window, 0, len(keys))
	rated := keys[:0]
	for _, key := range keys {
		first := claims[byKey[key][0]]
		w, err := ratelimit.Lock(ctx, ex, first.Rate, first.Queue, clock())
		if err != nil {
			return nil, promoted, err
		}
		if w == nil {
			// No rate at all (see ratelimit.Lock): the claims run unrated.
			for _, ci := range byKey[key] {
				out[ci].Run = true
			}
			continue
		}
		w.Cover(lag)
		rated, windows = append(rated, key), append(windows, w)
	}
	keys = rated
	stamps := make([][]int, len(keys)) // per key, the slots to start on
	for i, key := range keys {
		w, idx := windows[i], byKey[key]
		ids := make([]int64, len(idx))
		for j, ci := range idx {
			ids[j] = claims[ci].ID
		}
		reserved, err := ex.RateSlotListReserved(ctx, key, ids)
		if err != nil {
			return nil, promoted, err
		}
		var need []int // claims with no reservation
		for _, ci := range idx {
			if slot, ok := reserved[claims[ci].ID]; ok {
				stamps[i] = append(stamps[i], slot)
				out[ci].Run, out[ci].Slot = true, slot
			} else {
				need = append(need, ci)
			}
		}
		free, err := w.Free(ctx, len(need)+w.Waiting())
		if err != nil {
			return nil, promoted, err
		}
		for j, ci := range need {
			if j < len(free) {
				stamps[i] = append(stamps[i], free[j])
				out[ci].Run, out[ci].Slot = true, free[j]
			} else if err := toLine(ctx, ex, w, claims[ci], w.Now()); err != nil {
				return nil, promoted, err
			}
		}
		if err := w.PromoteInto(ctx, free[min(len(need), len(free)):]); err != nil {
			return nil, promoted, err
		}
		promoted.Add(w.Promoted())
	}
	for i, w := range windows {
		if err := w.Prepare(ctx, stamps[i]); err != nil {
			return nil, promoted, err
		}
	}
	// The stamps and the rows' writes go out last, with the commit.
	now := clock()
	for i, key := range keys {
		w := windows[i].At(now)
		if err := w.SaveStamping(ctx, stamps[i], now); err != nil {
			return nil, promoted, err
		}
		startBy, slack := w.StartBy(now), w.Slack()
		for _, ci := range byKey[key] {
			if out[ci].Run {
				out[ci].StartBy, out[ci].Slack = startBy, slack
			}
		}
	}
	return out, promoted, nil
}

// toLine puts claimed job c back in its rate key's line, unrun: the
// claim is deleted by fence (a stale one changes nothing).
func toLine(ctx context.Context, ex Store, w *ratelimit.Window, c *driver.Claim, now time.Time) error {
	ok, err := ex.ClaimDelete(ctx, c.ID, c.Fence)
	if err != nil || !ok {
		return err
	}
	row := driver.Execution{JobID: c.ID, Queue: c.Queue, Priority: c.Priority, Key: driver.RateLine(c.Rate.Key), At: now}
	if err := ex.ExecutionInsertMany(ctx, driver.StateBlocked, []driver.Execution{row}); err != nil {
		return err
	}
	w.Wait(1)
	return nil
}

// StartedLate ends a rated run that did not begin by its StartBy (its
// process froze or stalled between the claim and the run): it has not
// run, so its attempt is not counted, and it goes back to its key's line
// for a start of its own. It gives its start back: its slot is set to a
// Period before its claim, which it was free at, unless another start
// has taken the slot since (a long freeze), which then stays counted.
// A claim marked for cancel finishes cancelled.
func StartedLate(ctx context.Context, ex Store, c *driver.Claim, now time.Time) (Result, error) {
	if r, done, err := cancelIfMarked(ctx, ex, c, CancelledMessage, now); done || err != nil {
		return r, err
	}
	w, err := ratelimit.Lock(ctx, ex, c.Rate, c.Queue, now)
	if err != nil {
		return Result{}, err
	}
	if w == nil {
		return readyUnrated(ctx, ex, c, now)
	}
	before := w.Waiting()
	if err := toLine(ctx, ex, w, c, now); err != nil || w.Waiting() == before {
		return Result{}, err
	}
	period := w.Row().Period
	claimed := c.StartBy.Add(-c.StartSlack)
	stamped := ratelimit.Counted(c.StartBy, c.StartSlack)
	if _, err := ex.RateSlotUnstamp(ctx, driver.RateUnstampParams{Key: c.Rate.Key, Slot: c.RateSlot, Stamped: stamped, To: claimed.Add(-period)}); err != nil {
		return Result{}, err
	}
	if err := w.PromoteLine(ctx); err != nil {
		return Result{}, err
	}
	return Result{Matched: true, State: driver.StateBlocked, Promoted: w.Promoted()}, w.Save(ctx)
}

// readyUnrated puts a late claim of a key with no rate left at all (see
// ratelimit.Lock) back to ready, unrun: there is no line to wait in.
func readyUnrated(ctx context.Context, ex Store, c *driver.Claim, now time.Time) (Result, error) {
	ok, err := ex.ClaimDelete(ctx, c.ID, c.Fence)
	if err != nil || !ok {
		return Result{}, err
	}
	row := driver.Execution{JobID: c.ID, Queue: c.Queue, Priority: c.Priority, Key: c.Limit.Key, At: now}
	if err := ex.ExecutionInsertMany(ctx, driver.StateReady, []driver.Execution{row}); err != nil {
		return Result{}, err
	}
	return Result{Matched: true, State: driver.StateReady}, nil
}

// PromoteRate makes ready the jobs of key's line that free slots allow,
// for the dispatcher, skipping a key another transaction holds. With
// repair, it first frees slots reserved for jobs that will never start.
func PromoteRate(ctx context.Context, ex Store, key string, repair bool, now time.Time) (driver.Promotion, error) {
	w, err := ratelimit.TryLock(ctx, ex, key, now)
	if err != nil || w == nil {
		return driver.Promotion{}, err
	}
	if repair {
		if _, err := w.Repair(ctx); err != nil {
			return driver.Promotion{}, err
		}
	}
	if err := w.PromoteLine(ctx); err != nil {
		return driver.Promotion{}, err
	}
	return w.Promoted(), w.Save(ctx)
}

// ApplyRate applies key's rate now, after its override changed: the ring
// is resized to the resolved limit (keeping the newest starts) and the
// line promoted into what is free. A key never stored is created when
// spec has a limit.
func ApplyRate(ctx context.Context, ex Store, spec driver.RateSpec, now time.Time) (driver.Promotion, error) {
	w, err := ratelimit.Lock(ctx, ex, spec, "", now)
	if err != nil || w == nil {
		return driver.Promotion{}, err
	}
	if err := w.PromoteLine(ctx); err != nil {
		return driver.Promotion{}, err
	}
	return w.Promoted(), w.Save(ctx)
}

// RecountRate counts key's line from its rows, when its row says none
// waits but the line holds jobs (a drifted count would stall them), and
// promotes what free slots allow. It skips a key another transaction
// holds and returns how many jobs the line holds.
func RecountRate(ctx context.Context, ex Store, key string, now time.Time) (int, driver.Promotion, error) {
	w, err := ratelimit.TryLock(ctx, ex, key, now)
	if err != nil || w == nil {
		return 0, driver.Promotion{}, err
	}
	c, err := ex.HolderCount(ctx, driver.RateLine(key))
	if err != nil {
		return 0, driver.Promotion{}, err
	}
	n := c.Blocked
	w.Recount(n)
	if err := w.PromoteLine(ctx); err != nil {
		return 0, driver.Promotion{}, err
	}
	return n, w.Promoted(), w.Save(ctx)
}

// ErrNoRate refuses a job that leaves its rate to its queue's policy
// when the policy sets none: its starts would count against no rate.
var ErrNoRate = errors.New("the job's rate key has no rate")

// checkPolicyRates refuses (ErrNoRate) the first job with a rate key and
// no limit of its own whose queue's policy sets no MaxStartsPerKey. Each
// queue's policy is read once. A job admitted later (due scheduled, a
// retry) whose policy rate was removed meanwhile is not refused: it keeps
// its key's stored rate (see ratelimit.Lock).
func checkPolicyRates(ctx context.Context, ex Store, jobs []*driver.NewJob) error {
	rated := map[string]bool{}
	for _, j := range jobs {
		if j.Rate.Key == "" || j.Rate.Limit > 0 {
			continue
		}
		has, seen := rated[j.Queue]
		if !seen {
			p, err := ex.PolicyGetRate(ctx, j.Queue)
			if err != nil {
				return err
			}
			has = p.Limit > 0
			rated[j.Queue] = has
		}
		if !has {
			return fmt.Errorf("%w: job %s has rate key %q but its Rate sets no Limit and Period, and queue %q has no policy "+
				"MaxStartsPerKey: set Rate.Limit and Rate.Period (or WithRateKey's limit and period), or sync a Policy for queue %q "+
				"with MaxStartsPerKey and StartsPeriod", ErrNoRate, j.Kind, j.Rate.Key, j.Queue, j.Queue)
		}
	}
	return nil
}
