package sqlite

import (
	"database/sql"

	"github.com/bqueue/bq/internal/driver"
)

// Driver is bq's SQLite driver: pass it to bq.NewClient. It shows only
// what is safe to call; the statements bq runs stay inside.
type Driver struct{ driver.Sealed }

// DB returns the underlying *sql.DB.
func (d *Driver) DB() *sql.DB { return driver.EngineAs[*engine](d).db }

// WrappedTx is a transaction of yours wrapped for bq.Job.EnqueueTx.
type WrappedTx struct{ driver.UserTx }

// Tx wraps tx, begun on the *sql.DB bq uses (DB), so that Job.EnqueueTx
// writes inside it: the job exists only if tx commits.
func Tx(tx *sql.Tx) WrappedTx { return WrappedTx{driver.WrapUserTx(driver.SQLite, tx)} }
