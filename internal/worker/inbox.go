package worker

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// inboxLoop decides the inbox's pending rows (RunOptions.Inbox) until
// ctx ends: at once when woken — a client's notification on the
// inbox's channel (PostgreSQL), any commit to the database file
// (SQLite), a listener's start — else every PollInterval, jittered so
// that a fleet's processes do not poll in step. A full batch is followed
// by the next at once. Rows are taken with SKIP LOCKED, so processes
// polling together decide different rows, each exactly once.
func (c *Runtime) inboxLoop(ctx context.Context, pass func(ctx context.Context) (bool, error)) {
	wake := make(chan struct{}, 1)
	c.addWaker(driver.InboxWake, wake)
	defer c.removeWaker(driver.InboxWake, wake)
	const what = "decide the inbox's rows (trying again at the next poll)"
	for ctx.Err() == nil {
		more, err := pass(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			c.dbFailed(what, c.explainErr(ctx, err))
		default:
			c.dbOK(what, time.Time{})
		}
		if more && err == nil {
			continue
		}
		poll := c.cfg.PollInterval
		t := time.NewTimer(poll*3/4 + rand.N(poll/2+1))
		select {
		case <-ctx.Done():
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}
