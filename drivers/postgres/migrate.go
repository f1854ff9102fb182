package postgres

import (
	"context"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
)

// MigrationLock holds a session advisory lock on a connection of its own
// until unlock. The lock is database-wide, so it is keyed by schema and
// prefix: separate bq installations in one database do not wait on each
// other. The key is the one earlier releases took through goose's
// session locker, so processes of both exclude each other.
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
	err = driver.PollMigrationLock(ctx, fmt.Sprintf("%d", id), func() (got bool, err error) {
		err = conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", id).Scan(&got)
		return got, err
	})
	if err != nil {
		conn.Release()
		return nil, err
	}
	return func() {
		ctx := context.WithoutCancel(ctx)
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", id); err != nil {
			// The session would keep the lock: close it instead.
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}, nil
}
