package mysql

import (
	"database/sql"

	"github.com/bqueue/bq/internal/driver"
)

// Driver is bq's MySQL/MariaDB driver: pass it to bq.NewClient. It shows
// only what is safe to call; the statements bq runs stay inside.
type Driver struct {
	driver.Sealed
	e *engine
}

func seal(e *engine) *Driver { return &Driver{Sealed: driver.Seal(e), e: e} }

// DB returns the underlying *sql.DB.
func (d *Driver) DB() *sql.DB { return d.e.db }
