package bq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// EnqueueManyTx stores many jobs inside tx, the caller's transaction on
// the client's database, wrapped by its driver as for EnqueueTx. The
// jobs are admitted as EnqueueMany admits them and exist only if tx
// commits; other processes are told of the ready ones at the commit. A
// transient conflict (deadlock, serialization failure) is returned as
// ErrConflict for the caller to retry the whole transaction.
func (j *Job[A]) EnqueueManyTx(ctx context.Context, c *Client, tx Tx, args []A, opts ...EnqueueOption) ([]EnqueueResult, error) {
	raw, err := unwrapTx(c, tx, "EnqueueManyTx")
	if err != nil || len(args) == 0 {
		return nil, err
	}
	return j.enqueue(ctx, c, raw, args, opts)
}

// Item is one job of a batch for EnqueueBatch: args of one job kind with
// enqueue options of its own (a key, a priority, a run-at, a queue, any
// EnqueueOption), applied exactly as Enqueue applies them. Make it with
// the job's Item method; the zero Item is refused.
type Item struct {
	kind string
	// newJob makes the job to store at the batch's now.
	newJob func(ctx context.Context, c *Client, now time.Time) (*driver.NewJob, error)
}

// Item is one job of this kind for EnqueueBatch, with its own options:
//
//	client.EnqueueBatch(ctx, []bq.Item{
//		Charge.Item(ChargeArgs{OrderID: 1}, bq.Priority(5)),
//		Export.Item(ExportArgs{Tenant: "acme"}, bq.WithConcurrencyKey("tenant:acme", 2), bq.In(time.Hour)),
//	})
//
// The args are encoded and the options checked when the batch is
// enqueued; a bad one refuses the batch then.
func (j *Job[A]) Item(args A, opts ...EnqueueOption) Item {
	if j == nil {
		return Item{newJob: func(context.Context, *Client, time.Time) (*driver.NewJob, error) {
			return nil, fmt.Errorf("%w: the job is nil: make items from the *bq.Job that bq.Define returned", ErrInvalidJob)
		}}
	}
	o, err := applyOptions(opts)
	return Item{kind: j.name, newJob: func(ctx context.Context, c *Client, now time.Time) (*driver.NewJob, error) {
		if err != nil {
			return nil, err
		}
		return j.newJob(ctx, c, args, &o, now)
	}}
}

// EnqueueBatch stores items, of any job kinds and each with its own
// options, in one transaction: all of them or, if any item is invalid,
// none (the error names the item's index and the fix). They are admitted
// as EnqueueMany admits one kind's jobs: keys locked in sorted order, and
// within a key (kinds of one Concurrency.Group share keys) higher
// priority takes the free slots first, then the items' order; items due
// later are stored scheduled and take no slot now. The results follow
// the items' order. An empty batch stores nothing and returns nil.
func (c *Client) EnqueueBatch(ctx context.Context, items []Item) ([]EnqueueResult, error) {
	return c.enqueueBatch(ctx, nil, items)
}

// EnqueueBatchTx is EnqueueBatch inside tx, the caller's transaction,
// wrapped by its driver as for EnqueueTx: the items exist only if tx
// commits. A transient conflict is returned as ErrConflict for the
// caller to retry the whole transaction.
func (c *Client) EnqueueBatchTx(ctx context.Context, tx Tx, items []Item) ([]EnqueueResult, error) {
	raw, err := unwrapTx(c, tx, "EnqueueBatchTx")
	if err != nil {
		return nil, err
	}
	return c.enqueueBatch(ctx, raw, items)
}

func (c *Client) enqueueBatch(ctx context.Context, tx any, items []Item) ([]EnqueueResult, error) {
	if len(items) == 0 {
		return nil, nil
	}
	if c == nil {
		return nil, errors.New("enqueue batch: the client is nil: pass the *bq.Client from bq.Open or bq.NewClient")
	}
	now := c.cfg.Now()
	jobs := make([]*driver.NewJob, len(items))
	for i, it := range items {
		if it.newJob == nil {
			return nil, fmt.Errorf("%w: enqueue batch: items[%d] is the zero bq.Item: make each item with its job's Item method, e.g. Charge.Item(args, opts...)", ErrInvalidJob, i)
		}
		var err error
		if jobs[i], err = it.newJob(ctx, c, now); err != nil && it.kind == "" {
			return nil, fmt.Errorf("enqueue batch: items[%d]: %w", i, err)
		} else if err != nil {
			return nil, fmt.Errorf("enqueue batch: items[%d] (job %q): %w", i, it.kind, err)
		}
	}
	results, err := c.enqueueJobs(ctx, tx, jobs, now)
	if err != nil {
		return nil, fmt.Errorf("enqueue batch of %d items: %w", len(items), err)
	}
	return results, nil
}
