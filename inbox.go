package bq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/internal/worker"
)

// The inbox is how clients in other languages enqueue (clients/python,
// clients/typescript, docs/clients.md): each writes one row per job,
// kind, args and options as JSON, in its caller's transaction. Every
// process that runs (Run, RunWorkers, RunDispatcher) decides the pending
// rows of the job kinds it defines: it decodes the args into the job's
// type, reads the options as the EnqueueOptions they name, and enqueues
// the job through the Go enqueue, stamping the row's outcome in the same
// transaction. So every admission rule lives once, in Go, and a row is
// decided exactly once across the fleet: a transaction that fails stamps
// nothing, and rows are locked, skipping those another process holds.

// inboxBatch is how many rows one transaction decides.
const inboxBatch = 100

// inboxDecided is one batch's decisions, told after its commit.
type inboxDecided struct {
	jobs     []*driver.NewJob
	verdicts []lifecycle.Verdict
	queues   []string
	replaced map[int]lifecycle.Replaced
}

// inboxPass decides a batch of the inbox's pending rows of this
// process's kinds; more says the batch was full. A batch whose admission
// fails (a database error, a job its queue's policy cannot rate) is
// decided again row by row, so that no row holds up those behind it: a
// row that still fails stays pending for the next pass.
func (c *Client) inboxPass(ctx context.Context) (more bool, err error) {
	kinds := append(worker.Kinds(), driver.InboxPolicies)
	// A look first, outside any transaction: an idle inbox costs one
	// read, not a write transaction (SQLite's one write lock) per poll.
	if has, err := c.drv.Exec().InboxHasPending(ctx, kinds); err != nil || !has {
		return false, err
	}
	ids, err := c.decideInbox(ctx, driver.InboxLockParams{Kinds: kinds, Max: inboxBatch})
	if err == nil || ctx.Err() != nil {
		return len(ids) == inboxBatch, err
	}
	var errs []error
	for _, id := range ids {
		if _, err := c.decideInbox(ctx, driver.InboxLockParams{Kinds: kinds, ID: id, Max: 1}); err != nil {
			errs = append(errs, fmt.Errorf("inbox row %d: %w", id, err))
		}
	}
	return false, errors.Join(errs...)
}

// decideInbox decides the rows p selects in one transaction and returns
// the ids of the rows it took (its last attempt's, when it failed).
func (c *Client) decideInbox(ctx context.Context, p driver.InboxLockParams) ([]int64, error) {
	var taken []int64
	var done inboxDecided
	err := driver.InTx(ctx, c.drv, func(ex driver.Executor) error {
		rows, err := ex.InboxLockPending(ctx, p)
		if err != nil {
			return err
		}
		taken = taken[:0]
		for _, r := range rows {
			taken = append(taken, r.ID)
		}
		done, err = c.decideRows(ctx, ex, rows)
		return err
	})
	if err != nil {
		return taken, c.explainErr(ctx, err)
	}
	c.enqueued(ctx, done.jobs, done.verdicts, done.replaced)
	c.replaced(ctx, nil, done.jobs, done.replaced)
	c.rt.ReadyAll(done.queues)
	return taken, nil
}

// decideRows enqueues the jobs rows describe, in ex, and stamps each
// row's outcome there.
func (c *Client) decideRows(ctx context.Context, ex driver.Executor, rows []driver.InboxRow) (inboxDecided, error) {
	var d inboxDecided
	if len(rows) == 0 {
		return d, nil
	}
	now := c.cfg.Now()
	outcomes := make([]driver.InboxOutcome, len(rows))
	var of []int // of[k]: the row of d.jobs[k]
	for i, r := range rows {
		outcomes[i].ID = r.ID
		if r.Kind == driver.InboxPolicies {
			o, woken, err := c.applyInboxPolicies(ctx, ex, r, now)
			if err != nil {
				return d, err
			}
			outcomes[i] = o
			d.queues = append(d.queues, woken.Queues...)
			continue
		}
		job, err := c.inboxJob(ctx, r, now)
		if err != nil {
			outcomes[i].Outcome, outcomes[i].Detail = driver.InboxRefused, err.Error()
			continue
		}
		d.jobs = append(d.jobs, job)
		of = append(of, i)
	}
	if len(d.jobs) > 0 {
		// A replacing job beside another of its key fails the batch,
		// which is then decided row by row.
		if err := checkReplaces(d.jobs); err != nil {
			return d, err
		}
		ctx, traced := c.traceSend(ctx, d.jobs)
		verdicts, replaced, promoted, err := admitReplacing(ctx, ex, d.jobs, now)
		traced(verdicts, err)
		var missing *lifecycle.DependencyError
		switch {
		case (errors.Is(err, lifecycle.ErrNoRate) || errors.As(err, &missing)) && len(d.jobs) == 1:
			// The job's, not the database's: refused before any write
			// (but the flags of the dependencies found, which only make
			// their finishes look for dependents).
			outcomes[of[0]].Outcome, outcomes[of[0]].Detail = driver.InboxRefused, c.explainErr(ctx, err).Error()
			d.jobs = nil
		case err != nil:
			return d, err
		default:
			d.verdicts = verdicts
			d.queues = append(d.queues, readyQueues(d.jobs, verdicts, promoted)...)
			for k, v := range verdicts {
				outcomes[of[k]] = outcomeOf(rows[of[k]].ID, d.jobs[k], v, replaced[k])
			}
			if len(replaced) > 0 {
				d.replaced = replaced
			}
		}
	}
	if _, err := ex.InboxDecide(ctx, outcomes); err != nil {
		return d, err
	}
	return d, nil
}

// outcomeOf is the stamp of row id whose job admission judged v, having
// replaced the jobs replaced (named in the detail).
func outcomeOf(id int64, job *driver.NewJob, v lifecycle.Verdict, r lifecycle.Replaced) driver.InboxOutcome {
	switch {
	case v.Duplicate:
		return driver.InboxOutcome{ID: id, Outcome: driver.InboxDuplicate, JobID: v.DuplicateOf, Detail: v.Reason}
	case v.State == driver.StateDiscarded:
		return driver.InboxOutcome{ID: id, Outcome: driver.InboxDiscarded, Detail: v.Reason}
	case r.Into != 0:
		return driver.InboxOutcome{ID: id, Outcome: string(driver.StateScheduled), JobID: r.Into,
			Detail: fmt.Sprintf("debounced: joined job %d, waiting out its key's quiet period", r.Into)}
	case len(r.Cancelled)+len(r.Stopping) > 0:
		var said []string
		if len(r.Cancelled) > 0 {
			said = append(said, "replaced "+jobList(ids(r.Cancelled)))
		}
		if len(r.Stopping) > 0 {
			said = append(said, "asked "+jobList(ids(r.Stopping))+" to stop")
		}
		return driver.InboxOutcome{ID: id, Outcome: string(v.State), JobID: job.ID, Detail: strings.Join(said, "; ")}
	default:
		return driver.InboxOutcome{ID: id, Outcome: string(v.State), JobID: job.ID}
	}
}

// inboxJob turns row r into the job to store, as an enqueue of its kind
// with its args and options would: refused when this process has no
// definition of the kind, the args do not decode into the job's type
// (the error names the field), or the options are bad.
func (c *Client) inboxJob(ctx context.Context, r driver.InboxRow, now time.Time) (*driver.NewJob, error) {
	def, ok := worker.Lookup(r.Kind).(runDef)
	if !ok {
		return nil, fmt.Errorf("no job kind %q is defined in this process", r.Kind)
	}
	opts, err := inboxOptionsOf(r.Options)
	if err != nil {
		return nil, err
	}
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	return def.d.inboxJob(ctx, c, r.Args, &o, now)
}

// applyInboxPolicies applies the stored policies of the queues row r
// names to the keys of their unfinished jobs, as SyncPolicies does after
// it writes them: a client in another language wrote the policies in the
// transaction that wrote r.
func (c *Client) applyInboxPolicies(ctx context.Context, ex driver.Executor, r driver.InboxRow, now time.Time) (driver.InboxOutcome, driver.Promotion, error) {
	var args struct {
		Queues []string `json:"queues"`
	}
	if err := decodeStrict(r.Args, &args); err != nil {
		return driver.InboxOutcome{ID: r.ID, Outcome: driver.InboxRefused, Detail: fmt.Sprintf("args of %s: %v", r.Kind, err)}, driver.Promotion{}, nil
	}
	slices.Sort(args.Queues)
	queues := slices.Compact(args.Queues)
	stored, err := ex.PolicyLockMany(ctx, "", queues)
	if err != nil {
		return driver.InboxOutcome{}, driver.Promotion{}, err
	}
	var rerate []driver.Policy
	for _, p := range stored {
		if p.MaxStartsPerKey > 0 {
			rerate = append(rerate, p)
		}
	}
	woken, err := c.relimitQueues(ctx, ex, queues, now)
	if err != nil {
		return driver.InboxOutcome{}, woken, err
	}
	rated, err := c.rerateQueues(ctx, ex, rerate, now)
	woken.Add(rated)
	for _, q := range queues {
		woken.AddQueue(q)
	}
	return driver.InboxOutcome{ID: r.ID, Outcome: driver.InboxApplied}, woken, err
}
