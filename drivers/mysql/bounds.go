package mysql

import (
	"strconv"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// TxIdleTimeout bounds bq's sessions (see the package documentation): a
// transaction whose client stays silent this long is rolled back by the
// server, and a lock wait gives up after it.
const TxIdleTimeout = driver.TxIdleTimeout

// ConnMaxIdleTime is how long a pool should keep an idle connection whose
// session has wait_timeout = TxIdleTimeout, so that the server never
// closes one the pool still holds: a third of it, as database/sql closes
// idle connections up to a second late.
const ConnMaxIdleTime = TxIdleTimeout / 3

// txIdleTimeout is TxIdleTimeout; tests shorten it.
var txIdleTimeout = TxIdleTimeout

// seconds renders d for a session variable counted in whole seconds,
// rounding up.
func seconds(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}

// setBounds adds bq's session bounds to params, keeping those the URL
// set: innodb_lock_wait_timeout everywhere; idle_transaction_timeout on
// MariaDB; wait_timeout on MySQL, which has no idle-transaction timeout,
// or when the server is not known (s == nil: DSN).
func setBounds(params map[string]string, s *serverKind) {
	n := seconds(txIdleTimeout)
	if _, ok := params["innodb_lock_wait_timeout"]; !ok {
		params["innodb_lock_wait_timeout"] = n
	}
	_, idleTx := params["idle_transaction_timeout"]
	_, idleWrite := params["idle_write_transaction_timeout"]
	_, wait := params["wait_timeout"]
	switch {
	case idleTx || idleWrite:
		// The URL chose its idle-transaction bound.
	case s != nil && s.mariaDB:
		params["idle_transaction_timeout"] = n
	case !wait:
		params["wait_timeout"] = n
	}
}

// connMaxIdleTime is how long a pool keeps an idle connection whose
// session ends after wait idle seconds.
func connMaxIdleTime(wait time.Duration) time.Duration {
	return min(5*time.Minute, wait/3)
}
