package bqtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/worker"
)

// WorkOption sets the job context Work runs a job in.
type WorkOption func(*workOptions)

type workOptions struct {
	worker.WorkOptions
	bad string // a problem with an option, failing the test
}

// WithAttempt runs the job as its attempt n (1 on the first run), as
// bq.JobFromContext reports it. Default 1.
func WithAttempt(n int) WorkOption {
	return func(o *workOptions) {
		if n < 1 {
			o.bad = fmt.Sprintf("WithAttempt(%d): attempts count from 1", n)
		}
		o.Attempt = n
	}
}

// WithJobID sets the job's ID. Default 0: no job is stored.
func WithJobID(id int64) WorkOption { return func(o *workOptions) { o.ID = id } }

// WithKey sets the job's full concurrency key (Group + "/" + Key).
// Default: the key the job's Concurrency computes from args, "" for a
// job without one.
func WithKey(fullKey string) WorkOption {
	return func(o *workOptions) { o.Key = &fullKey }
}

// WithMetadata gives the job metadata, as bq.WithMetadata does at
// enqueue. Given twice, the pairs merge.
func WithMetadata(md map[string]string) WorkOption {
	return func(o *workOptions) {
		if o.Metadata == nil {
			o.Metadata = map[string]string{}
		}
		maps.Copy(o.Metadata, md)
	}
}

// WithTags adds tags to those of the job's definition, as bq.WithTags
// does at enqueue.
func WithTags(tags ...string) WorkOption {
	return func(o *workOptions) { o.Tags = append(o.Tags, tags...) }
}

// Work runs job's function on args as a worker would, without a
// database, and returns its error: args go through JSON as when stored,
// bq.JobFromContext returns the job's kind, queue, attempt, key,
// metadata and tags (the definition's, or as opts set them), the
// definition's Timeout bounds the context, the definition's
// JobOptions.Middleware wraps the run (Config.WorkerMiddleware belongs to
// a client, so it does not), and a panic comes back as an error carrying
// its stack. Nothing is recorded: what the error would
// make of the job (a retry, bq.Snooze, bq.Cancel) is for the test to
// check. A job that cannot run at all (an invalid definition, args that
// do not encode, metadata, tags or a key that an enqueue would refuse)
// fails the test.
func Work[A any](ctx context.Context, tb testing.TB, job *bq.Job[A], args A, opts ...WorkOption) error {
	tb.Helper()
	if job == nil {
		tb.Fatalf("bqtest.Work: the job is nil: pass a job bq.Define returned")
	}
	if err := job.Err(); err != nil {
		tb.Fatalf("bqtest.Work: %v", err)
	}
	var o workOptions
	for i, opt := range opts {
		if opt == nil {
			tb.Fatalf("bqtest.Work: option %d is nil: pass options such as bqtest.WithAttempt(2), or leave it out", i)
		}
		opt(&o)
	}
	if o.bad != "" {
		tb.Fatalf("bqtest.Work: %s", o.bad)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		tb.Fatalf("bqtest.Work: encode args of job kind %q as JSON: %v; bq.Enqueue would refuse them too", job.Name(), err)
	}
	def := worker.Of(job)
	if def == nil {
		tb.Fatalf("bqtest.Work: job kind %q has no definition in this binary", job.Name())
	}
	err = def.Work(ctx, raw, o.WorkOptions)
	if errors.Is(err, worker.ErrNotRun) {
		tb.Fatalf("bqtest.Work: %v", err)
	}
	return err
}
