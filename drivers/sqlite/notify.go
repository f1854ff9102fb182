package sqlite

import (
	"context"
	"time"
)

// watchEvery is how often Listen looks for commits of other connections.
const watchEvery = 50 * time.Millisecond

// Notify does nothing: on SQLite the commit itself is the signal, seen by
// Listen through PRAGMA data_version.
func (d *engine) Notify(context.Context, string, []string) error { return nil }

// NotifyTx does nothing, as Notify.
func (d *engine) NotifyTx(context.Context, any, []string) error { return nil }

// Listen watches PRAGMA data_version, which changes whenever another
// connection (of this process or another) commits to the database file,
// and calls ready("") for every change: a cheap cross-process wake-up
// that reads no table. An in-memory database has one connection and one
// process, so it is not watched.
func (d *engine) Listen(ctx context.Context, _ string, ready func(queue string), failed func(error)) error {
	if d.memory {
		return nil
	}
	c, err := d.db.Conn(ctx)
	if err != nil {
		failed(err)
		return nil
	}
	defer c.Close()
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	last := int64(-1)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var v int64
		if err := c.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			failed(err)
			continue
		}
		// The first read is the baseline: a commit before it is seen by
		// none, so every queue looks once then, as after any change.
		if last < 0 || v != last {
			ready("")
		}
		last = v
	}
}
