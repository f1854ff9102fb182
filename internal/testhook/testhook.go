// Package testhook is the seam between package bq and package bqtest: bq
// sets these functions in its init, bqtest calls them. They take and
// return bq's types as any, since bq imports this package and not the
// other way round; users cannot import it, so bq's public API stays free
// of test-only entry points.
package testhook

import (
	"context"
	"errors"
)

// ListJobsTx is (*bq.Client).ListJobs read through the caller's
// transaction: func(ctx, *bq.Client, bq.Tx, bq.JobFilter) (bq.JobPage, error).
var ListJobsTx func(ctx context.Context, client, tx, filter any) (any, error)

// CheckTx returns EnqueueTx's error for a bq.Tx the *bq.Client cannot
// use (nil inside, another database's), naming call, nil for one it can.
var CheckTx func(client, tx any, call string) error

// DueScheduled reports whether a scheduled job of the client
// (*bq.Client) is due by its clock: one its dispatcher will promote. It
// reads the scheduled table, since a retry's due time is not the
// ScheduledAt of its JobInfo.
var DueScheduled func(ctx context.Context, client any) (bool, error)

// Work runs the function of job (a *bq.Job[A]) on args (its JSON) as a
// worker would, with the job context o describes.
var Work func(ctx context.Context, job any, args []byte, o WorkOptions) error

// ErrNotRun wraps Work's refusals: the job's function did not run, the
// definition or the options being invalid.
var ErrNotRun = errors.New("the job did not run")

// WorkOptions is the job context of a Work run; zero fields take the
// values a first run would have.
type WorkOptions struct {
	ID       int64
	Attempt  int     // default 1
	Key      *string // default: the key the job's definition computes
	Metadata map[string]string
	Tags     []string // added to the definition's tags
}
