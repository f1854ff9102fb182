package mysql

import (
	"testing"

	"github.com/bqueue/bq/internal/driver/drivertest"
	"github.com/bqueue/bq/internal/testdb"
)

// TestDriverContractPortable runs the method-level driver suite with the
// paths MySQL 8 takes (no RETURNING), whatever the server: on MariaDB
// they are otherwise left untried.
func TestDriverContractPortable(t *testing.T) {
	testdb.Require(t, testdb.MySQL)
	portableOnly = true
	t.Cleanup(func() { portableOnly = false })
	drivertest.ExerciseDatabase(t, testdb.MySQL)
}
