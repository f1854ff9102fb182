package bq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/metrics"
)

// EnqueueResult says what became of one enqueued job.
type EnqueueResult struct {
	// ID of the stored job; 0 when discarded.
	ID int64
	// State is where the job went, in the words of Job(ctx, id).State:
	//
	//	StateReady      stored, holding a slot of its key if keyed
	//	StateBlocked    stored, waiting for a slot of its key
	//	StateScheduled  stored to run later; admitted when due
	//	StateWaiting    stored, waiting for the jobs it depends on
	//	StateCancelled  stored cancelled: a job it depends on had failed
	//	StateDiscarded  its key had no free slot and the job discards on
	//	                conflict (or its key's backlog was full): nothing
	//	                was stored
	//
	// For a Duplicate it is the state of the job it duplicates, at the
	// check ("" when that job committed after the snapshot of the
	// caller's REPEATABLE READ transaction on MySQL).
	State JobState
	// Reason explains a discard or a duplicate, naming the job that
	// holds the key or has the unique key.
	Reason string
	// HeldBy is, for a discarded job, the id of one job holding its
	// key's slots (ready or running); 0 when none is known.
	HeldBy int64
	// Duplicate: the job was not stored (ID is 0) since job DuplicateOf,
	// in State at the check, has its unique key (see Unique). Of two
	// items with one unique key in an EnqueueMany, the second is a
	// duplicate of the first.
	Duplicate   bool
	DuplicateOf int64
	// Replaced names the jobs of its key this one replaced (OnConflict
	// Replace or CancelRunning): ready or blocked until this enqueue,
	// cancelled by it.
	Replaced []int64
	// Stopping names the running jobs of its key whose cancel it
	// requested (OnConflict CancelRunning): each ends as its run returns,
	// and frees its slot then.
	Stopping []int64
	// Debounced: no job was stored; the job of its key and kind waiting
	// out its quiet period (ID, StateScheduled) took this enqueue
	// (Concurrency.Debounce): it now comes due Debounce from now (within
	// DebounceMaxWait of its own enqueue), with this enqueue's args
	// unless DebounceFirst.
	Debounced bool
	// ExpectedStart is when a blocked job is expected to start: now plus
	// its place in its key's line times the key's recent release interval
	// (see docs/flow-control.md). Zero when the job is not blocked or its
	// key has no release interval measured yet (never a made-up figure).
	ExpectedStart time.Time
	// Refused is set, with State StateDiscarded and nothing stored, for a
	// job of EnqueueMany, EnqueueManyTx or EnqueueBatch that its key's
	// Concurrency.MaxWait refused; Enqueue and EnqueueTx return it as
	// their error instead.
	Refused *WaitTooLongError
}

// Enqueue stores one job, admitting it through its concurrency key.
func (j *Job[A]) Enqueue(ctx context.Context, c *Client, args A, opts ...EnqueueOption) (EnqueueResult, error) {
	res, err := j.enqueue(ctx, c, nil, []A{args}, opts)
	if err != nil {
		return EnqueueResult{}, err
	}
	return j.one(res[0])
}

// one is the result of Enqueue or EnqueueTx: a job MaxWait refused is
// their error.
func (j *Job[A]) one(res EnqueueResult) (EnqueueResult, error) {
	if res.Refused != nil {
		return EnqueueResult{}, fmt.Errorf("enqueue %q: %w", j.name, res.Refused)
	}
	return res, nil
}

// EnqueueTx stores one job inside tx, the caller's transaction on the
// client's database, wrapped by its driver: postgres.Tx for a pgx.Tx
// (PostgreSQL), mysql.Tx for a *sql.Tx (MySQL/MariaDB), sqlite.Tx for a
// *sql.Tx (SQLite), each begun on the pool or *sql.DB the driver uses:
//
//	res, err := Charge.EnqueueTx(ctx, client, postgres.Tx(tx), args)
//
// The job exists only if tx commits. A transient conflict (deadlock,
// serialization failure) is returned as ErrConflict for the caller to
// retry the whole transaction.
func (j *Job[A]) EnqueueTx(ctx context.Context, c *Client, tx Tx, args A, opts ...EnqueueOption) (EnqueueResult, error) {
	raw, err := unwrapTx(c, tx, "EnqueueTx")
	if err != nil {
		return EnqueueResult{}, err
	}
	res, err := j.enqueue(ctx, c, raw, []A{args}, opts)
	if err != nil {
		return EnqueueResult{}, err
	}
	return j.one(res[0])
}

// EnqueueMany stores many jobs in one transaction. Keyed jobs are
// admitted key by key in sorted order; within a key, higher priority
// takes the free slots first, then args' order. The results follow
// args' order. Invalid args (one that does not encode, a bad key) refuse
// the whole call, naming its index, and store nothing.
func (j *Job[A]) EnqueueMany(ctx context.Context, c *Client, args []A, opts ...EnqueueOption) ([]EnqueueResult, error) {
	if len(args) == 0 {
		return nil, nil
	}
	return j.enqueue(ctx, c, nil, args, opts)
}

func (j *Job[A]) enqueue(ctx context.Context, c *Client, tx any, args []A, opts []EnqueueOption) ([]EnqueueResult, error) {
	if j.err != nil {
		return nil, j.err
	}
	if c == nil {
		return nil, errors.New("enqueue: the client is nil: pass the *bq.Client from bq.Open or bq.NewClient")
	}
	o, err := applyOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("enqueue %q: %w", j.name, err)
	}
	now := c.cfg.Now()
	jobs := make([]*driver.NewJob, len(args))
	for i, a := range args {
		if jobs[i], err = j.newJob(ctx, c, a, &o, now); err != nil {
			if len(args) > 1 {
				return nil, fmt.Errorf("enqueue %q: args[%d]: %w", j.name, i, err)
			}
			return nil, fmt.Errorf("enqueue %q: %w", j.name, err)
		}
	}
	results, err := c.enqueueJobs(ctx, tx, jobs, now)
	if err != nil {
		return nil, fmt.Errorf("enqueue %q: %w", j.name, err)
	}
	return results, nil
}

// newJob turns one job's args and options into the job to store. Every
// enqueue path (Enqueue, EnqueueTx, EnqueueMany, EnqueueManyTx and each
// Item of EnqueueBatch) goes through it, so an option means the same
// everywhere; an option added to enqueueOptions is applied here.
// The enqueue hooks of c and of the definition run last, on the job
// as the options made it.
func (j *Job[A]) newJob(ctx context.Context, c *Client, args A, o *enqueueOptions, now time.Time) (*driver.NewJob, error) {
	if j.err != nil {
		return nil, j.err
	}
	queue := j.opts.Queue
	if o.queue != nil {
		if err := validateQueue(*o.queue); err != nil {
			return nil, fmt.Errorf("%w: bq.Queue option: %w", ErrInvalidJob, err)
		}
		queue = *o.queue
	}
	priority := j.opts.Priority
	if o.priority != nil {
		priority = *o.priority
	}
	if err := validatePriority(priority); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJob, err)
	}
	unique := j.opts.Unique
	if o.unique != nil {
		if err := o.unique.validate(); err != nil {
			return nil, fmt.Errorf("%w: bq.WithUnique option: %w", ErrInvalidJob, err)
		}
		unique = o.unique
	}
	md, tagList := o.metadata, mergeTags(j.opts.Tags, o.tags)
	metadata, err := encodeMetadata(md)
	if err != nil {
		return nil, fmt.Errorf("%w: bq.WithMetadata: %w", ErrInvalidJob, err)
	}
	tags, err := encodeTags(tagList)
	if err != nil {
		return nil, fmt.Errorf("%w: bq.WithTags: %w", ErrInvalidJob, err)
	}
	at := now
	switch {
	case !o.at.IsZero():
		at = o.at
	case o.in > 0:
		at = now.Add(o.in)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("%w: encode args as JSON: %w: give the args type fields encoding/json can encode", ErrInvalidJob, err)
	}
	if err := checkArgsSize(raw); err != nil {
		return nil, err
	}
	limit, more, err := j.limits(args, o)
	if err != nil {
		return nil, err
	}
	if err := j.keyedForReplace(limit); err != nil {
		return nil, err
	}
	replace, cancelRunning, err := replaces(&limit, more, at.After(now))
	if err != nil {
		return nil, err
	}
	if replace || cancelRunning {
		// It takes the place of the key's queued jobs, which it cancels
		// first: refusing it then would leave the key none.
		limit.MaxWait = 0
	}
	debounce, err := j.debounce(limit, more, !o.at.IsZero() || o.in > 0)
	if err != nil {
		return nil, err
	}
	deps, err := o.dependencies(debounce > 0, replace || cancelRunning)
	if err != nil {
		return nil, err
	}
	if debounce > 0 {
		at, replace, cancelRunning = now.Add(debounce), true, false
	}
	rate, err := j.rateOf(args, o)
	if err != nil {
		return nil, err
	}
	slots := j.opts.Slots
	if o.slots != nil {
		slots = *o.slots
	}
	if err := slotsAtEnqueue(slots, limit, more, j.adaptiveMin()).problem(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJob, err)
	}
	if limit.Sequence && rate.Key != "" {
		return nil, fmt.Errorf("%w: WithRateKey(%s) on a job whose Concurrency.Sequence is set: a sequence's retry keeps its place without waiting for a start again; drop the rate key, or define the job without Sequence", ErrInvalidJob, quoted(rate.Key))
	}
	if len(c.cfg.EnqueueHooks)+len(j.opts.EnqueueHooks) > 0 {
		p := pendingOf(j.name, queue, limit.Key, raw, priority, md, tagList)
		if err := c.applyHooks(ctx, j.opts.EnqueueHooks, p); err != nil {
			return nil, err
		}
		priority = p.Priority
		// applyHooks checked them: encoding cannot fail.
		metadata, _ = encodeMetadata(p.Metadata)
		tags, _ = encodeTags(p.Tags)
	}
	job := &driver.NewJob{Kind: j.name, Queue: queue, Args: raw, Priority: priority,
		MaxAttempts: j.opts.MaxAttempts, Limit: limit, More: more, Slots: driver.SlotsOf(slots), Rate: rate, ScheduledAt: at, Metadata: metadata, Tags: tags,
		Replace: replace, CancelRunning: cancelRunning, Debounce: debounce > 0, DependsOn: deps, EvenIfFailed: o.evenIfFailed}
	if debounce > 0 {
		job.DebounceMaxWait, job.DebounceFirst = j.opts.Concurrency.DebounceMaxWait, j.opts.Concurrency.DebounceFirst
	}
	if unique != nil {
		job.UniqueKey, job.UniqueStates = unique.key(j.name, queue, raw, at), unique.states()
	}
	return job, nil
}

// enqueueJobs admits and stores jobs made by newJob at now, in tx (the
// caller's transaction) when given, and counts and logs each.
func (c *Client) enqueueJobs(ctx context.Context, tx any, jobs []*driver.NewJob, now time.Time) ([]EnqueueResult, error) {
	var ex driver.Executor
	if tx != nil {
		var err error
		if ex, err = c.drv.WrapTx(tx); err != nil {
			return nil, fmt.Errorf("use the transaction: %w", err)
		}
	}
	given := jobs
	jobs, standsFor := collapseDebounced(jobs)
	if err := checkReplaces(jobs); err != nil {
		return nil, err
	}
	ctx, traced := c.traceSend(ctx, jobs)
	verdicts, replaced, err := c.insert(ctx, ex, tx, jobs, now)
	traced(verdicts, err)
	if err != nil {
		return nil, err
	}
	c.enqueued(ctx, jobs, verdicts, replaced)
	c.replaced(ctx, tx, jobs, replaced)
	results := make([]EnqueueResult, len(jobs))
	for i, v := range verdicts {
		switch {
		case v.Duplicate:
			results[i] = EnqueueResult{State: JobState(v.State), Reason: v.Reason, Duplicate: true, DuplicateOf: v.DuplicateOf}
		case v.State == driver.StateDiscarded:
			results[i] = EnqueueResult{State: StateDiscarded, Reason: v.Reason, HeldBy: v.HeldBy, Refused: waitTooLong(v.Wait)}
		case replaced[i].Into != 0:
			results[i] = EnqueueResult{ID: replaced[i].Into, State: StateScheduled, Debounced: true}
		default:
			r := replaced[i]
			results[i] = EnqueueResult{ID: jobs[i].ID, State: JobState(v.State), Replaced: ids(r.Cancelled), Stopping: ids(r.Stopping)}
			if v.State == driver.StateBlocked && v.Wait.Expected > 0 {
				results[i].ExpectedStart = now.Add(v.Wait.Expected)
			}
		}
	}
	if len(jobs) < len(given) {
		// A debounced job folded into another of the enqueue joined it.
		all := make([]EnqueueResult, len(given))
		for i, k := range standsFor {
			all[i] = results[k]
			if given[i] != jobs[k] {
				all[i] = EnqueueResult{ID: results[k].ID, State: results[k].State, Debounced: true}
			}
		}
		results = all
	}
	return results, nil
}

// insert admits and stores jobs, in ex when given (the caller's
// transaction) or in a transaction of the client's own.
func (c *Client) insert(ctx context.Context, ex driver.Executor, tx any, jobs []*driver.NewJob, now time.Time) ([]lifecycle.Verdict, map[int]lifecycle.Replaced, error) {
	if ex != nil {
		out, replaced, promoted, err := admitReplacing(ctx, ex, jobs, now)
		if err != nil && c.drv.Retryable(err) {
			return nil, nil, fmt.Errorf("%w: %w", ErrConflict, err)
		}
		if err != nil {
			return nil, nil, c.explainErr(ctx, err)
		}
		c.rt.NotifyTx(ctx, tx, readyQueues(jobs, out, promoted))
		return out, replaced, nil
	}
	var verdicts []lifecycle.Verdict
	var replaced map[int]lifecycle.Replaced
	var promoted driver.Promotion
	var err error
	run := driver.InTx
	if !admits(jobs, now) {
		// No key to lock: the insert is the only write.
		run = driver.Atomic
	}
	err = run(ctx, c.drv, func(ex driver.Executor) (err error) {
		verdicts, replaced, promoted, err = admitReplacing(ctx, ex, jobs, now)
		return err
	})
	if err != nil {
		return nil, nil, c.explainErr(ctx, err)
	}
	c.rt.ReadyAll(readyQueues(jobs, verdicts, promoted))
	return verdicts, replaced, nil
}

// readyQueues lists the queues that got ready jobs, once each: those of
// the jobs admitted, and those admission promoted.
func readyQueues(jobs []*driver.NewJob, verdicts []lifecycle.Verdict, promoted driver.Promotion) []string {
	qs := slices.Clone(promoted.Queues)
	for i, v := range verdicts {
		if q := jobs[i].Queue; v.State == driver.StateReady && !v.Duplicate && !slices.Contains(qs, q) {
			qs = append(qs, q)
		}
	}
	return qs
}

// admits reports whether any job is keyed and due now, so its admission
// must lock a semaphore in the same transaction as the insert, or is
// unique, so its check must lock its unique key.
func admits(jobs []*driver.NewJob, now time.Time) bool {
	for _, j := range jobs {
		due := !j.ScheduledAt.After(now)
		// A job leaving its rate to its policy reads the policy in the
		// insert's transaction.
		policyRate := j.Rate.Key != "" && j.Rate.Limit == 0
		// A replacing job (Replace, CancelRunning, Debounce) cancels what
		// it replaces under its key's lock, held to the commit.
		if j.UniqueKey != "" || policyRate || j.Replace || (due && (j.Limit.Key != "" || j.Rate.Key != "")) {
			return true
		}
	}
	return false
}

// enqueued logs and counts stored and discarded jobs. Jobs enqueued in the
// caller's transaction are counted at once, even if it later rolls back.
func (c *Client) enqueued(ctx context.Context, jobs []*driver.NewJob, verdicts []lifecycle.Verdict, replaced map[int]lifecycle.Replaced) {
	debug := c.log.Enabled(ctx, slog.LevelDebug)
	for i, v := range verdicts {
		j := jobs[i]
		if into := replaced[i].Into; into != 0 {
			if debug {
				c.log.Debug("job not enqueued: debounced into its key's waiting job", "kind", j.Kind, "queue", j.Queue, "job_id", into)
			}
			continue
		}
		if v.Duplicate {
			if debug {
				c.log.Debug("job not enqueued: duplicate", "kind", j.Kind, "queue", j.Queue, "duplicate_of", v.DuplicateOf)
			}
			continue
		}
		state := v.State
		c.met.Enqueue(ctx, metrics.Job{Queue: j.Queue, Kind: j.Kind, Key: j.Limit.Key}, state)
		if debug {
			c.log.Debug("job enqueued: "+string(state), "job_id", j.ID, "kind", j.Kind, "queue", j.Queue,
				driver.LogKey(j.Limit.Key), "state", state)
		}
	}
}
