package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
)

// channel is the LISTEN/NOTIFY channel of this prefix's installation.
func (d *engine) channel() string { return d.prefix + "ready" }

// inboxChannel is the channel clients in other languages notify, in the
// transaction that writes their inbox rows (docs/clients.md).
func (d *engine) inboxChannel() string { return d.prefix + "inbox" }

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

// probeWait is how long the listener waits, once listening, for the
// notification it sent itself through the pool before it concludes that
// notifications do not reach it; deafRecheck is how long it then waits
// before it tries again on a new connection. Tests shorten them on an
// engine of their own (its probe field).
const (
	probeWait   = 5 * time.Second
	deafRecheck = time.Minute
)

// probeTimes are the listener's probeWait and deafRecheck.
type probeTimes struct{ wait, recheck time.Duration }

// Listen holds one connection in LISTEN until ctx ends: one of its own
// when the driver has a listen configuration (listen_dsn, ListenWith),
// else one taken out of the pool.
//
// Through a pooler in transaction mode (PgBouncer) LISTEN succeeds and
// hears nothing: it takes hold on a server connection the pooler hands to
// other clients once the statement ends. So the listener checks it hears:
// it also listens on a channel of its own and notifies that channel
// through the pool, as Notify would, expecting to hear it within
// probeWait. When it does not, it hands failed a *driver.DeafListener
// (callers log it as a warning; workers poll meanwhile), once until it
// hears again, and notifies itself anew every deafRecheck. It keeps its
// connection all the while: a probe merely late (a loaded machine) is
// heard on it in the end, and so is every notification before it.
func (d *engine) Listen(ctx context.Context, self string, ready func(queue string), failed func(error)) error {
	backoff := 100 * time.Millisecond
	warned := false
	for ctx.Err() == nil {
		heard, err := d.listenOnce(ctx, self, ready, func(deaf error) {
			if !warned {
				failed(deaf)
				warned = true
			}
		})
		if ctx.Err() != nil {
			return nil
		}
		if heard {
			backoff, warned = 100*time.Millisecond, false
		}
		failed(fmt.Errorf("listen for ready jobs: %w", err))
		wait := backoff/2 + mrand.N(backoff)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	return nil
}

// listenConn is the listener's connection.
func (d *engine) listenConn(ctx context.Context) (*pgx.Conn, error) {
	if d.listen != nil {
		return pgx.ConnectConfig(ctx, d.listen.Copy())
	}
	pooled, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	// A connection left listening must not go back to the pool.
	return pooled.Hijack(), nil
}

// listenOnce listens on one connection until it breaks or ctx ends.
// heard reports whether it heard its probe; each time the probe's time
// is up unheard, it calls deaf.
func (d *engine) listenOnce(ctx context.Context, self string, ready func(queue string), deaf func(error)) (heard bool, err error) {
	conn, err := d.listenConn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	probe := probeChannel()
	// One simple-protocol query, one implicit transaction: the LISTENs
	// take hold on one server connection, or none does.
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{d.channel()}.Sanitize()+"; LISTEN "+pgx.Identifier{d.inboxChannel()}.Sanitize()+
		"; LISTEN "+pgx.Identifier{probe}.Sanitize()); err != nil {
		return false, err
	}
	// Whatever was notified before LISTEN took hold is lost: every queue
	// looks once now.
	ready("")
	send := func(within time.Duration) (time.Time, error) {
		if _, err := d.pool.Exec(ctx, "SELECT pg_notify($1, '')", probe); err != nil {
			return time.Time{}, fmt.Errorf("notify the listener's own channel: %w", err)
		}
		return time.Now().Add(within), nil
	}
	due, err := send(d.probe.wait)
	if err != nil {
		return false, err
	}
	for {
		wait, stop := ctx, context.CancelFunc(func() {})
		if !heard {
			wait, stop = context.WithDeadline(ctx, due)
		}
		n, err := conn.WaitForNotification(wait)
		stop()
		if err != nil {
			if heard || ctx.Err() != nil || wait.Err() == nil {
				return heard, err
			}
			// The probe's time is up, unheard: the connection stays
			// usable after a deadline.
			deaf(d.deaf(conn))
			if due, err = send(d.probe.recheck); err != nil {
				return false, err
			}
			continue
		}
		switch {
		case n.Channel == probe:
			heard = true
		case n.Channel == d.inboxChannel():
			ready(driver.InboxWake)
		case n.Channel != d.channel():
		default:
			if q, own := notifiedQueue(n.Payload, self); !own {
				ready(q)
			}
		}
	}
}

// probeChannel is a channel no other listener uses.
func probeChannel() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "bq_probe_" + hex.EncodeToString(b)
}

// deaf describes a listener on conn that did not hear its probe.
func (d *engine) deaf(conn *pgx.Conn) error {
	c := d.pool.Config().ConnConfig
	pool := hostPort(c.Host, c.Port)
	retry := fmt.Sprintf("Workers find jobs made ready in other processes at their next poll (Config.PollInterval) meanwhile; bq tries again every %s", d.probe.recheck)
	if d.listen != nil {
		lc := conn.Config()
		return &driver.DeafListener{Reason: fmt.Sprintf(
			"notifications sent through %s do not reach bq's listener at %s (listen_dsn) within %s: does listen_dsn reach the same database, directly rather than through a pooler in transaction mode? %s",
			pool, hostPort(lc.Host, lc.Port), d.probe.wait, retry)}
	}
	return &driver.DeafListener{Reason: fmt.Sprintf(
		"notifications through %s are not delivered: bq's listener heard nothing within %s of its own NOTIFY. A pooler in transaction mode (PgBouncer)? LISTEN does not work through it: give the listener a direct connection to PostgreSQL with %s=postgres://host:5432 in the DSN (ListenWith on a pool of your own). %s",
		pool, d.probe.wait, ListenDSNParam, retry)}
}

func hostPort(host string, port uint16) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(int(port))
}
