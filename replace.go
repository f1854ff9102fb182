package bq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/metrics"
	"github.com/bqueue/bq/internal/worker"
)

// replaces reports whether a job whose limits are first and more
// replaces its key's queued jobs (OnConflict Replace or CancelRunning)
// and whether it also stops the running ones, storing first as Block
// (the job waits its turn as Block does once admitted); it refuses
// either on a job of several keys or one due later.
func replaces(first *driver.Limit, more []driver.Limit, later bool) (replace, running bool, err error) {
	isReplace := func(l driver.Limit) bool { return l.OnConflict >= driver.OnConflict(Replace) }
	if !isReplace(*first) && !slices.ContainsFunc(more, isReplace) {
		return false, false, nil
	}
	if len(more) > 0 {
		return false, false, fmt.Errorf("%w: %s", ErrInvalidJob, replaceOneKey)
	}
	if later {
		return false, false, fmt.Errorf("%w: OnConflict %s with bq.At or bq.In: a job replaces its key's jobs when it is enqueued, so it must be due now; drop At/In, or use bq.Block", ErrInvalidJob, OnConflict(first.OnConflict))
	}
	running = first.OnConflict == driver.OnConflict(CancelRunning)
	first.OnConflict = driver.Block
	return first.Key != "", running && first.Key != "", nil
}

// keyedForReplace refuses a job of a kind that replaces (OnConflict
// Replace or CancelRunning on Concurrency) whose key came out empty, its
// limit being limit: there is no key whose jobs it would replace, and
// running it unlimited would not be what the kind asked for.
func (j *Job[A]) keyedForReplace(limit driver.Limit) error {
	c := j.opts.Concurrency
	if c == nil || c.OnConflict < Replace || limit.Key != "" {
		return nil
	}
	return fmt.Errorf("%w: OnConflict %s on a job with no key (its Key returned \"\"): there is no key whose jobs it would replace; return a key for every job of the kind (RequireKey refuses the rest)", ErrInvalidJob, c.OnConflict)
}

// debounce is the quiet period of a job whose first limit is first: its
// Concurrency's Debounce, when that limit is its key (0 for none); with
// At or In (timed) or further keys, refused.
func (j *Job[A]) debounce(first driver.Limit, more []driver.Limit, timed bool) (time.Duration, error) {
	c := j.opts.Concurrency
	if c == nil || c.Debounce <= 0 {
		return 0, nil
	}
	if first.Key == "" {
		return 0, fmt.Errorf("%w: Concurrency.Debounce on a job with no key (its Key returned \"\"): debounce runs a key's jobs once per quiet period, so each job needs its key; return a key for every job of the kind", ErrInvalidJob)
	}
	if len(more) > 0 {
		return 0, fmt.Errorf("%w: Concurrency.Debounce on a job of several keys: debounce is for a job with one concurrency key; drop the further keys", ErrInvalidJob)
	}
	if timed {
		return 0, fmt.Errorf("%w: Concurrency.Debounce with bq.At or bq.In: a debounced job is due its Debounce after its enqueue; drop At/In", ErrInvalidJob)
	}
	return c.Debounce, nil
}

// debounceProblems are what is wrong with a kind's debounce settings
// (Define): on Concurrency only, positive, bounded by a MaxWait no
// shorter than itself.
func debounceProblems[A any](c *Concurrency[A], more []Concurrency[A]) []error {
	var errs []error
	for i, m := range more {
		if m.Debounce != 0 || m.DebounceMaxWait != 0 || m.DebounceFirst {
			errs = append(errs, fmt.Errorf("MoreConcurrency[%d] sets a debounce: debounce a job's one key, on Concurrency", i))
		}
	}
	if c == nil {
		return errs
	}
	switch {
	case c.Debounce < 0:
		errs = append(errs, fmt.Errorf("Concurrency.Debounce is %s: use a positive duration, or 0 for none", c.Debounce))
	case c.Debounce == 0 && (c.DebounceMaxWait != 0 || c.DebounceFirst):
		errs = append(errs, errors.New("Concurrency.DebounceMaxWait or DebounceFirst without Debounce: set Debounce, the quiet period they apply to"))
	case c.Debounce > 0 && len(more) > 0:
		errs = append(errs, errors.New("Concurrency.Debounce with MoreConcurrency: debounce is for a job with one concurrency key; drop the further keys or the debounce"))
	}
	if w := c.DebounceMaxWait; w != 0 && c.Debounce > 0 && w < c.Debounce {
		errs = append(errs, fmt.Errorf("Concurrency.DebounceMaxWait is %s, below Debounce %s: a burst's job would come due before its first quiet period ends; set it at least Debounce, or 0 for no bound", w, c.Debounce))
	}
	return errs
}

func (j *Job[A]) debounced() (wait, maxWait time.Duration) {
	if c := j.opts.Concurrency; c != nil {
		return c.Debounce, c.DebounceMaxWait
	}
	return 0, 0
}

// debounceSummary is Explain's sentence on a waiting first attempt of a
// debounced kind defined in this process ("" for any other): what moves
// it, and by when it comes due at the latest.
func debounceSummary(info *JobInfo, now time.Time) string {
	def, ok := worker.Lookup(info.Kind).(runDef)
	if !ok || info.Attempts > 0 {
		return ""
	}
	wait, maxWait := def.d.debounced()
	if wait <= 0 {
		return ""
	}
	s := fmt.Sprintf(" Debounced: each enqueue of its kind on its key joins it and moves it to %s after that enqueue", wait)
	if maxWait > 0 {
		s += fmt.Sprintf(", but no later than %s (DebounceMaxWait %s after its own enqueue)", when(info.CreatedAt.Add(maxWait), now), maxWait)
	}
	return s + "."
}

// collapseDebounced folds the debounced jobs of one kind, queue and key
// among jobs into one, as the same enqueues one after another would: the
// last is kept (the first, with DebounceFirst), the others joining it.
// It returns the jobs kept, in their order, and for each job given the
// index among them of the one that stands for it.
func collapseDebounced(jobs []*driver.NewJob) ([]*driver.NewJob, []int) {
	type burst struct{ kind, queue, key string }
	keep := map[burst]int{} // the index given of the job kept
	for i, j := range jobs {
		if !j.Debounce {
			continue
		}
		b := burst{j.Kind, j.Queue, j.Limit.Key}
		if _, seen := keep[b]; !seen || !j.DebounceFirst {
			keep[b] = i
		}
	}
	if len(keep) == 0 {
		return jobs, nil
	}
	kept := make([]*driver.NewJob, 0, len(jobs))
	at := make([]int, len(jobs)) // given index -> kept index, for kept jobs
	for i, j := range jobs {
		if j.Debounce && keep[burst{j.Kind, j.Queue, j.Limit.Key}] != i {
			continue
		}
		at[i] = len(kept)
		kept = append(kept, j)
	}
	if len(kept) == len(jobs) {
		return jobs, nil
	}
	standsFor := make([]int, len(jobs))
	for i, j := range jobs {
		standsFor[i] = at[i]
		if j.Debounce {
			standsFor[i] = at[keep[burst{j.Kind, j.Queue, j.Limit.Key}]]
		}
	}
	return kept, standsFor
}

// checkReplaces refuses a batch in which a replacing job shares its key
// with another job of the batch: the replace cancels the key's queued
// jobs before the batch is admitted, so it would not see the other.
func checkReplaces(jobs []*driver.NewJob) error {
	holders := map[string]int{}
	for _, j := range jobs {
		for _, l := range j.Keys() {
			holders[l.Key]++
		}
	}
	for _, j := range jobs {
		if j.Replace && holders[j.Limit.Key] > 1 {
			return fmt.Errorf("%w: a job replacing on key %q shares the key with another job of this enqueue, which it would not replace: enqueue the replacing job on its own (and only the newest)", ErrInvalidJob, j.Limit.Key)
		}
	}
	return nil
}

// replaced records what the replacing jobs did, after the commit: the
// cancelled jobs counted and logged as a cancel is, and, when a run was
// asked to stop, every process woken to look for its marked runs (in
// that transaction's notifications when it is the caller's).
func (c *Client) replaced(ctx context.Context, tx any, jobs []*driver.NewJob, out map[int]lifecycle.Replaced) {
	stopping := false
	for i, r := range out {
		for _, x := range r.Cancelled {
			c.log.Info("job replaced by a newer one of its key: cancelled", "job_id", x.Job.ID, "kind", x.Job.Kind,
				"queue", x.Job.Queue, "key", x.Job.Limit.Key, "replaced_by_kind", jobs[i].Kind)
			c.met.Cancelled(ctx, metrics.JobOf(x.Job), "replace")
		}
		for _, x := range r.Stopping {
			c.log.Info("running job asked to stop for a newer one of its key", "job_id", x.Job.ID, "kind", x.Job.Kind,
				"queue", x.Job.Queue, "key", x.Job.Limit.Key, "requested_at", x.RequestedAt)
			stopping = true
		}
	}
	if !stopping {
		return
	}
	if tx != nil {
		c.rt.NotifyTx(ctx, tx, []string{worker.CancelSignal})
	} else {
		c.rt.Ready(worker.CancelSignal)
	}
}

// ids lists the jobs of cs.
func ids(cs []lifecycle.Cancellation) []int64 {
	out := make([]int64, len(cs))
	for i, x := range cs {
		out[i] = x.Job.ID
	}
	return out
}

// admitReplacing cancels what the replacing jobs replace, then admits
// jobs, in ex's transaction (lifecycle.Replace, lifecycle.Admit).
// A debounced job that joined its key's waiting job is not admitted: its
// verdict is that job's state, scheduled.
func admitReplacing(ctx context.Context, ex driver.Executor, jobs []*driver.NewJob, now time.Time) ([]lifecycle.Verdict, map[int]lifecycle.Replaced, driver.Promotion, error) {
	replaced, promoted, err := lifecycle.Replace(ctx, ex, jobs, now)
	if err != nil {
		return nil, nil, promoted, err
	}
	admit, at := jobs, []int(nil)
	if joined(replaced) {
		admit = nil
		for i, j := range jobs {
			if replaced[i].Into == 0 {
				admit, at = append(admit, j), append(at, i)
			}
		}
	}
	verdicts, admitted, err := lifecycle.Admit(ctx, ex, admit, now)
	promoted.Add(admitted)
	if err != nil || !joined(replaced) {
		return verdicts, replaced, promoted, err
	}
	all := make([]lifecycle.Verdict, len(jobs))
	for i := range all {
		all[i] = lifecycle.Verdict{State: driver.StateScheduled}
	}
	for n, k := range at {
		all[k] = verdicts[n]
	}
	return all, replaced, promoted, nil
}

// joined reports whether a debounced job joined its key's waiting job.
func joined(replaced map[int]lifecycle.Replaced) bool {
	for _, r := range replaced {
		if r.Into != 0 {
			return true
		}
	}
	return false
}

// sequenceProblems refuses a Concurrency.Sequence that cannot keep its
// promise: a sequence runs its key's jobs one at a time, in enqueue order,
// and a failing job keeps its key's slot through its retries, so it is a
// limit of 1 on a job's one key, whose jobs wait their turn (Block).
func sequenceProblems[A any](c *Concurrency[A], more []Concurrency[A]) []error {
	var errs []error
	for i, m := range more {
		if m.Sequence || m.SequenceHaltOnFailure {
			errs = append(errs, fmt.Errorf("MoreConcurrency[%d] sets Sequence: a sequence is a job's one key; set Sequence on Concurrency and drop the further keys", i))
		}
	}
	if c != nil && c.SequenceHaltOnFailure && !c.Sequence {
		errs = append(errs, errors.New("Concurrency.SequenceHaltOnFailure without Sequence: it halts a sequence after a failure; set Sequence too, or drop it"))
	}
	if c == nil || !c.Sequence {
		return errs
	}
	if c.To > 1 {
		errs = append(errs, fmt.Errorf("Concurrency.Sequence with To %d: a sequence runs its key's jobs one at a time; set To to 1 (or leave it 0), or drop Sequence to let %d run at once", c.To, c.To))
	}
	if c.OnConflict != Block {
		errs = append(errs, fmt.Errorf("Concurrency.Sequence with OnConflict %s: a sequence's jobs wait their turn; use bq.Block (the default), or drop Sequence", c.OnConflict))
	}
	if c.Debounce != 0 {
		errs = append(errs, errors.New("Concurrency.Sequence with Debounce: a sequence runs every job of its key in order, a debounce only the last of a burst; drop one of them"))
	}
	if len(more) > 0 {
		errs = append(errs, errors.New("Concurrency.Sequence with MoreConcurrency: a sequence is a job's one key; drop the further keys or Sequence"))
	}
	return errs
}

// sequenceKeyProblem refuses a per-enqueue key that would break the
// definition's sequence (Concurrency.Sequence): a limit above 1, a
// conflict other than Block, or further keys.
func sequenceKeyProblem(key string, to int, onConflict *OnConflict, more bool) error {
	switch {
	case to > 1:
		return fmt.Errorf("%w: WithConcurrencyKey(%s, %d) on a job whose Concurrency.Sequence is set: a sequence runs its key's jobs one at a time; pass a limit of 1 (or 0), or define the job without Sequence", ErrInvalidJob, quoted(key), to)
	case onConflict != nil && *onConflict != Block:
		return fmt.Errorf("%w: WithConcurrencyKey(%s) with OnConflict %s on a job whose Concurrency.Sequence is set: a sequence's jobs wait their turn; use bq.Block, or define the job without Sequence", ErrInvalidJob, quoted(key), *onConflict)
	case more:
		return fmt.Errorf("%w: WithMoreConcurrencyKeys on a job whose Concurrency.Sequence is set: a sequence is a job's one key; drop the further keys", ErrInvalidJob)
	}
	return nil
}

// sequenceSummary says what a blocked job of a sequence waits for when its
// key's holder is a job scheduled for a retry keeping its place: "Waiting
// for job 41 of the sequence, attempt 3 of 25, retrying at …", or a
// failed job halting it. Otherwise it returns summary unchanged.
func (c *Client) sequenceSummary(ctx context.Context, k *KeyState, ahead int, summary string, now time.Time) (string, error) {
	i := slices.IndexFunc(k.Holders, func(h Holder) bool { return h.State == StateScheduled || h.State == StateFailed })
	if i < 0 {
		return summary, nil
	}
	info, ok, err := c.drv.Exec().JobGet(ctx, k.Holders[i].JobID)
	if err != nil {
		return "", fmt.Errorf("read the holder of %q: %w", k.Key, err)
	}
	switch {
	case !ok || !info.SlotHeld:
		return summary, nil // it moved on meanwhile
	case info.State == driver.StateFailed:
		return fmt.Sprintf("Waiting for job %d of the sequence, which failed for good (attempt %d of %d) and halts the sequence of key %q: "+
			"retry it (bq retry, Client.RetryFailed) to run it again first, or discard it (bq discard, Client.DiscardFailed) to go on; %s.",
			info.ID, info.Attempt, info.MaxAttempts, k.Key, aheadOf(ahead)), nil
	case info.State != driver.StateScheduled:
		return summary, nil
	}
	retry := "retrying"
	if info.LastError == "" {
		retry = "snoozed until" // no attempt failed: it snoozed
	}
	return fmt.Sprintf("Waiting for job %d of the sequence, attempt %d of %d, %s at %s: the sequence of key %q keeps a failing job's place through its retries; %s.",
		info.ID, info.Attempt+1, info.MaxAttempts, retry, when(info.ScheduledAt, now), k.Key, aheadOf(ahead)), nil
}
