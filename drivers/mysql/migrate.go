package mysql

import (
	"context"
	sqldriver "database/sql/driver"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
)

// MigrationLock holds a named lock of the server (GET_LOCK, MySQL 5.7+ and
// MariaDB), keyed by database and prefix, on a connection of its own
// until unlock. The lock ends with its session, so a migrator that dies
// releases it; the session's wait_timeout is raised first, since bq's own
// sessions may have a short one (see New) and this one sits idle while
// the migrations run on others.
func (d *engine) MigrationLock(ctx context.Context) (func(), error) {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("take migration lock: %w", err)
	}
	var database string
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&database); err != nil {
		conn.Close()
		return nil, fmt.Errorf("take migration lock: read current database: %w", err)
	}
	name := fmt.Sprintf("bq-migrate-%016x", driver.MigrationLockKey(database, d.prefix))
	if _, err := conn.ExecContext(ctx, "SET SESSION wait_timeout = 28800"); err != nil {
		conn.Close()
		return nil, fmt.Errorf("take migration lock %s: %w", name, err)
	}
	var got *int64
	wait := int(driver.MigrationLockWait.Seconds())
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, wait).Scan(&got); err != nil {
		conn.Close()
		return nil, fmt.Errorf("take migration lock %s: %w", name, err)
	}
	if got == nil || *got != 1 {
		conn.Close()
		return nil, fmt.Errorf("take migration lock %s: another process has held it for %ds; is a migration stuck?", name, wait)
	}
	return func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", name); err != nil {
			// Ending the session releases the lock too.
			_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
		}
		conn.Close()
	}, nil
}
