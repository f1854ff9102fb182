package bq

import (
	"context"
	"fmt"
	"slices"

	"github.com/bqueue/bq/internal/driver"
)

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
