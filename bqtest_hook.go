package bq

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/bqueue/bq/internal/runtime"
	"github.com/bqueue/bq/internal/testhook"
)

// Package bqtest reaches these through internal/testhook, so the public
// API carries no test-only function.
func init() {
	testhook.CheckTx = func(client, tx any, call string) error {
		_, err := unwrapTx(client.(*Client), tx.(Tx), call)
		return err
	}
	testhook.ListJobsTx = func(ctx context.Context, client, tx, filter any) (any, error) {
		c := client.(*Client)
		raw, err := unwrapTx(c, tx.(Tx), "ListJobsTx")
		if err != nil {
			return JobPage{}, err
		}
		ex, err := c.drv.WrapTx(raw)
		if err != nil {
			return JobPage{}, fmt.Errorf("use the transaction: %w", err)
		}
		return c.listJobs(ctx, ex, filter.(JobFilter))
	}
	testhook.DueScheduled = func(ctx context.Context, client any) (bool, error) {
		c := client.(*Client)
		due, err := c.drv.Exec().HasDueScheduled(ctx, c.cfg.Now())
		if err != nil {
			return false, c.explainErr(ctx, err)
		}
		return due, nil
	}
	testhook.Work = func(ctx context.Context, job any, args []byte, o testhook.WorkOptions) error {
		return job.(interface {
			work(context.Context, []byte, testhook.WorkOptions) error
		}).work(ctx, args, o)
	}
}

// work runs the job's function on raw as execute does — args decoded
// from JSON, the job context set, Timeout applied, the definition's
// middleware around it, a panic returned as an error — with no database: the context's lease checks nothing.
func (j *Job[A]) work(ctx context.Context, raw []byte, o testhook.WorkOptions) error {
	meta, err := j.workMeta(raw, o)
	if err != nil {
		return fmt.Errorf("%w: %w", testhook.ErrNotRun, err)
	}
	runCtx := runtime.WithMeta(ctx, runtime.Meta(meta))
	if t := j.opts.Timeout; t > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(runCtx, t)
		defer cancel()
	}
	// The definition's middleware runs as in a worker; Config's belongs
	// to a client, and Work has none.
	return runThrough(runCtx, meta, nil, j, raw, func(string, string) {})
}

// workMeta is the job context of a Work run, refusing what an enqueue
// would refuse.
func (j *Job[A]) workMeta(raw []byte, o testhook.WorkOptions) (JobMeta, error) {
	if j.err != nil {
		return JobMeta{}, j.err
	}
	var args A
	if err := json.Unmarshal(raw, &args); err != nil {
		return JobMeta{}, fmt.Errorf("decode args of job kind %q as %T: %w", j.name, args, err)
	}
	meta := JobMeta{ID: o.ID, Kind: j.name, Queue: j.opts.Queue, Attempt: max(o.Attempt, 1),
		MaxAttempts: j.opts.MaxAttempts, Metadata: o.Metadata, Tags: mergeTags(j.opts.Tags, o.Tags)}
	if _, err := encodeMetadata(meta.Metadata); err != nil {
		return JobMeta{}, fmt.Errorf("%w: bqtest.WithMetadata: %w", ErrInvalidJob, err)
	}
	if _, err := encodeTags(meta.Tags); err != nil {
		return JobMeta{}, fmt.Errorf("%w: bqtest.WithTags: %w", ErrInvalidJob, err)
	}
	if o.Key != nil {
		if err := validateKey(*o.Key); err != nil {
			return JobMeta{}, fmt.Errorf("%w: bqtest.WithKey: %w", ErrInvalidJob, err)
		}
		meta.Key = *o.Key
		return meta, nil
	}
	l, err := j.limit(args, &enqueueOptions{})
	if err != nil {
		return JobMeta{}, err
	}
	meta.Key = l.Key
	return meta, nil
}
