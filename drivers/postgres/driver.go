package postgres

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq/internal/driver"
)

// Driver is bq's PostgreSQL driver: pass it to bq.NewClient. It shows
// only what is safe to call; the statements bq runs stay inside.
type Driver struct{ driver.Sealed }

// Pool returns the underlying pool.
func (d *Driver) Pool() *pgxpool.Pool { return driver.EngineAs[*engine](d).pool }

// WrappedTx is a transaction of yours wrapped for bq.Job.EnqueueTx.
type WrappedTx struct{ driver.UserTx }

// Tx wraps tx, begun on the pool bq uses (Pool), so that
// Job.EnqueueTx writes inside it: the job exists only if tx commits. bq
// sets no timeout inside it.
func Tx(tx pgx.Tx) WrappedTx { return WrappedTx{driver.WrapUserTx(driver.Postgres, tx)} }
