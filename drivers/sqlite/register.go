package sqlite

import (
	"context"

	"github.com/bqueue/bq/internal/driver"
)

// Importing the package lets bq.Open take sqlite: DSNs, as importing a
// database/sql driver registers it.
func init() { driver.Register(driver.Opens(openDSN), "sqlite") }

// openDSN opens sqlite:///path/to/file.db (or sqlite:path) and
// sqlite::memory:; a query string is ignored, as bq sets its own pragmas.
func openDSN(ctx context.Context, dsn string) (*Driver, error) {
	path, err := ParseURL(dsn)
	if err != nil {
		return nil, err
	}
	return Open(ctx, path)
}
