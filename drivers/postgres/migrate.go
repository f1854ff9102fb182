package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
)

// MigrationLock holds an advisory lock until unlock, in a transaction of
// its own kept open meanwhile (pg_advisory_xact_lock): a transaction
// keeps its server connection through a pooler in transaction mode
// (PgBouncer), where a session lock would stay on a server connection the
// pooler hands to other clients, and its unlock go to another. A try that
// finds the lock taken ends its transaction, so that waiting migrators
// hold no server connection the holder's migrations need. The lock is
// database-wide, so it is keyed by schema and prefix: separate bq
// installations in one database do not wait on each other. The key is
// the one earlier releases took through goose's session locker and as a
// session lock of their own: transaction and session locks of one key
// exclude each other, so processes of every release exclude each other.
// The holding transaction sets idle_in_transaction_session_timeout to 0
// for itself: it idles while the migrations run, beside it.
func (d *engine) MigrationLock(ctx context.Context) (func(), error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("take migration lock: %w", err)
	}
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		conn.Release()
		return nil, fmt.Errorf("take migration lock: read current schema: %w", err)
	}
	id := int64(driver.MigrationLockKey(schema, d.prefix) >> 1)
	var tx pgx.Tx
	err = driver.PollMigrationLock(ctx, fmt.Sprintf("%d", id), func() (got bool, err error) {
		if tx, err = conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}); err != nil {
			return false, err
		}
		err = tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1), set_config('"+idleTimeoutParam+"', '0', true)", id).Scan(&got, nil)
		if err != nil || !got {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
		return got, err
	})
	if err != nil {
		conn.Release()
		return nil, err
	}
	return func() {
		if err := tx.Rollback(context.WithoutCancel(ctx)); err != nil {
			// The lock ends with the transaction: close the connection
			// rather than leave it open.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
		conn.Release()
	}, nil
}
