package bq

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// Batch is a set of jobs with callbacks: OnSuccess runs once every job
// of the batch completed (it is cancelled if one fails for good or is
// cancelled), OnFinish once every job ended, however. Each callback is
// stored with the batch, waiting for its jobs (DependsOn), and is
// admitted by the transaction that ends the batch's last job: exactly
// once across a fleet, even when the last two jobs end at the same
// instant in two processes, or a worker dies right after. See
// docs/workflows.md.
//
//	res, err := bq.NewBatch(items...).OnSuccess(Notify.Item(NotifyArgs{Import: id})).Enqueue(ctx, client)
type Batch struct {
	items               []Item
	onSuccess, onFinish *Item
}

// NewBatch starts a batch of items (a job kind's Item each, with its own
// options).
func NewBatch(items ...Item) *Batch { return &Batch{items: slices.Clone(items)} }

// OnSuccess sets the job that runs once every job of the batch completed.
func (b *Batch) OnSuccess(item Item) *Batch { b.onSuccess = &item; return b }

// OnFinish sets the job that runs once every job of the batch ended,
// whatever each outcome.
func (b *Batch) OnFinish(item Item) *Batch { b.onFinish = &item; return b }

// BatchResult is what Enqueue stored: the batch's id (MetaBatch), its
// jobs' results in the items' order, and its callbacks' (ID 0 when
// unset).
type BatchResult struct {
	ID                  string
	Jobs                []EnqueueResult
	OnSuccess, OnFinish EnqueueResult
}

// Enqueue stores the batch and its callbacks in one transaction.
func (b *Batch) Enqueue(ctx context.Context, c *Client) (*BatchResult, error) {
	return inOwnTx(ctx, c, "batch", b.EnqueueTx)
}

// inOwnTx runs enqueue (of a workflow or a batch: what) in a transaction
// of its own.
func inOwnTx[R any](ctx context.Context, c *Client, what string, enqueue func(context.Context, *Client, Tx) (R, error)) (R, error) {
	var res R
	if c == nil {
		return res, fmt.Errorf("enqueue %s: the client is nil: pass the *bq.Client from bq.Open or bq.NewClient", what)
	}
	err := c.InTx(ctx, func(ctx context.Context, tx Tx) (err error) {
		res, err = enqueue(ctx, c, tx)
		return err
	})
	return res, err
}

// EnqueueTx stores the batch inside tx, the caller's transaction.
func (b *Batch) EnqueueTx(ctx context.Context, c *Client, tx Tx) (*BatchResult, error) {
	switch {
	case len(b.items) == 0:
		return nil, fmt.Errorf("%w: enqueue batch: it has no job: pass items to NewBatch", ErrInvalidJob)
	case len(b.items) > MaxDependencies:
		return nil, fmt.Errorf("%w: enqueue batch: %d jobs, above MaxDependencies (%d): split it into batches", ErrInvalidJob, len(b.items), MaxDependencies)
	case b.onSuccess == nil && b.onFinish == nil:
		return nil, fmt.Errorf("%w: enqueue batch: no callback: set OnSuccess or OnFinish, or use EnqueueBatch for jobs alone", ErrInvalidJob)
	}
	raw, err := unwrapTx(c, tx, "Batch.EnqueueTx")
	if err != nil {
		return nil, err
	}
	res := &BatchResult{ID: newGroupID()}
	md := map[string]string{MetaBatch: res.ID}
	now := c.cfg.Now()
	jobs := make([]*driver.NewJob, len(b.items))
	for i, it := range b.items {
		if jobs[i], err = it.make(ctx, c, now); err != nil {
			return nil, fmt.Errorf("enqueue batch: items[%d]: %w", i, err)
		}
		if jobs[i].Metadata, err = withMetadata(jobs[i].Metadata, md); err != nil {
			return nil, fmt.Errorf("enqueue batch: items[%d]: %w", i, err)
		}
	}
	if res.Jobs, err = c.enqueueJobs(ctx, raw, jobs, now); err != nil {
		return nil, fmt.Errorf("enqueue batch: %w", err)
	}
	var ids []int64
	for _, r := range res.Jobs {
		if r.ID != 0 && !r.Duplicate {
			ids = append(ids, r.ID)
		}
	}
	callback := func(it *Item, which string, evenIfFailed bool) (EnqueueResult, error) {
		if it == nil {
			return EnqueueResult{}, nil
		}
		j, err := it.make(ctx, c, now)
		if err != nil {
			return EnqueueResult{}, fmt.Errorf("enqueue batch: the %s callback: %w", which, err)
		}
		md[MetaCallback] = which
		if j.Metadata, err = withMetadata(j.Metadata, md); err != nil {
			return EnqueueResult{}, fmt.Errorf("enqueue batch: the %s callback: %w", which, err)
		}
		j.DependsOn, j.EvenIfFailed = ids, evenIfFailed && len(ids) > 0
		r, err := c.enqueueJobs(ctx, raw, []*driver.NewJob{j}, now)
		if err != nil {
			return EnqueueResult{}, fmt.Errorf("enqueue batch: the %s callback: %w", which, err)
		}
		return r[0], nil
	}
	if res.OnSuccess, err = callback(b.onSuccess, "success", false); err != nil {
		return nil, err
	}
	if res.OnFinish, err = callback(b.onFinish, "finish", true); err != nil {
		return nil, err
	}
	return res, nil
}
