package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// channel is the LISTEN/NOTIFY channel of this prefix's installation.
func (d *engine) channel() string { return d.prefix + "ready" }

// Notify sends one notification per queue, outside any transaction: a
// NOTIFY inside the enqueue transaction would serialise every committing
// enqueue on PostgreSQL's notification queue lock. The payload is the
// queue, then a space and origin when there is one (a queue name holds no
// space), so that the sender's own listener skips what it woke already:
// under load, each completion batch that promoted jobs would otherwise wake
// its own process twice, and the second claim finds nothing.
func (d *engine) Notify(ctx context.Context, origin string, queues []string) error {
	if _, err := d.pool.Exec(ctx, `SELECT pg_notify($1, CASE WHEN $3 = '' THEN q ELSE q || ' ' || $3 END) FROM unnest($2::text[]) AS q`,
		d.channel(), queues, origin); err != nil {
		return fmt.Errorf("notify ready queues: %w", err)
	}
	return nil
}

// notifiedQueue reads a payload of Notify or NotifyTx: the queue, and
// whether the listener self sent it.
func notifiedQueue(payload, self string) (queue string, own bool) {
	queue, origin, found := strings.Cut(payload, " ")
	return queue, found && self != "" && origin == self
}

// NotifyTx notifies inside the caller's pgx.Tx: PostgreSQL delivers it at
// commit, never after a rollback.
func (d *engine) NotifyTx(ctx context.Context, tx any, queues []string) error {
	t, ok := tx.(pgx.Tx)
	if !ok {
		return fmt.Errorf("notify in a %T: want a pgx.Tx", tx)
	}
	if _, err := t.Exec(ctx, `SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q`, d.channel(), queues); err != nil {
		return fmt.Errorf("notify ready queues: %w", err)
	}
	return nil
}

// Listen holds one connection in LISTEN until ctx ends.
func (d *engine) Listen(ctx context.Context, self string, ready func(queue string), failed func(error)) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := d.listenOnce(ctx, self, ready)
		if ctx.Err() != nil {
			return nil
		}
		failed(fmt.Errorf("listen for ready jobs: %w", err))
		wait := backoff/2 + rand.N(backoff)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	return nil
}

func (d *engine) listenOnce(ctx context.Context, self string, ready func(queue string)) error {
	pooled, err := d.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection left listening must not go back to the pool.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{d.channel()}.Sanitize()); err != nil {
		return err
	}
	// Whatever was notified before LISTEN took hold is lost: every queue
	// looks once now.
	ready("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if q, own := notifiedQueue(n.Payload, self); !own {
			ready(q)
		}
	}
}
