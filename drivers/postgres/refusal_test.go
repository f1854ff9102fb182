package postgres

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/bqueue/bq/internal/driver"
)

// TestRefusal: read_only_sql_transaction is a read-only refusal and
// disk_full a full one, wrapped or not; other errors are neither.
func TestRefusal(t *testing.T) {
	d := &engine{}
	for code, want := range map[string]driver.Refusal{"25006": driver.ReadOnly, "53100": driver.Full, "40001": driver.NotRefused, "23505": driver.NotRefused} {
		err := fmt.Errorf("enqueue: %w", &pgconn.PgError{Code: code})
		if got := d.Refusal(err); got != want {
			t.Errorf("Refusal(SQLSTATE %s) = %v, want %v", code, got, want)
		}
	}
}
