package mysql

import "github.com/bqueue/bq/internal/driver"

// inbox wakes the inbox's deciders when a row past the highest seen has
// committed: clients in other languages write the inbox, not the signal
// log. last is the primary key's end, read with the signal log's tail
// (listener.poll). A row that commits after a higher one was seen
// (ids commit out of order) wakes no one: the deciders' poll finds it.
func (l *listener) inbox(last int64) {
	if last > l.inboxLast {
		l.inboxLast = last
		l.ready(driver.InboxWake)
	}
}
