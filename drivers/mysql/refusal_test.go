package mysql

import (
	"fmt"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/bqueue/bq/internal/driver"
)

// TestRefusal: the read-only errors (the server's read_only, a read-only
// transaction, innodb_read_only) and the full ones (disk, table space)
// are told apart from the rest, wrapped or not.
func TestRefusal(t *testing.T) {
	d := &engine{}
	for n, want := range map[uint16]driver.Refusal{1290: driver.ReadOnly, 1792: driver.ReadOnly, 1836: driver.ReadOnly,
		1021: driver.Full, 1114: driver.Full, 1213: driver.NotRefused, 1062: driver.NotRefused} {
		err := fmt.Errorf("enqueue: %w", &gomysql.MySQLError{Number: n})
		if got := d.Refusal(err); got != want {
			t.Errorf("Refusal(error %d) = %v, want %v", n, got, want)
		}
	}
}
