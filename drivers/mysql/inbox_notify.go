package mysql

import (
	"context"

	"github.com/bqueue/bq/internal/driver"
)

// inbox wakes the inbox's deciders when a row past the highest seen has
// committed: clients in other languages write the inbox, not the signal
// log. One read of the primary key's end. A row that commits after a
// higher one was seen (ids commit out of order) wakes no one: the
// deciders' poll finds it.
func (l *listener) inbox(ctx context.Context) error {
	var last int64
	if err := l.d.db.QueryRowContext(ctx, "SELECT coalesce(max(id), 0) FROM "+l.d.prefix+"inbox").Scan(&last); err != nil {
		return err
	}
	if last > l.inboxLast {
		l.inboxLast = last
		l.ready(driver.InboxWake)
	}
	return nil
}
