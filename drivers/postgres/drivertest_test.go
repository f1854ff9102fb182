package postgres_test

import (
	"testing"

	_ "github.com/bqueue/bq/drivers/postgres"
	"github.com/bqueue/bq/internal/driver/drivertest"
	"github.com/bqueue/bq/internal/testdb"
)

// TestDriverContract runs the method-level driver suite on fresh
// databases of this driver.
func TestDriverContract(t *testing.T) { drivertest.ExerciseDatabase(t, testdb.Postgres) }
