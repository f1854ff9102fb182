package mysql_test

import (
	"context"
	"testing"

	"github.com/bqueue/bq/drivers/mysql"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/drivertest"
	"github.com/bqueue/bq/internal/testdb"
)

// TestDriverContract runs the method-level driver suite on a fresh
// database per test.
func TestDriverContract(t *testing.T) {
	testdb.Require(t, testdb.MySQL)
	drivertest.Exercise(t, func(t *testing.T) driver.Driver {
		d, err := mysql.Open(context.Background(), testdb.FreshMySQL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return drivertest.Migrate(t, driver.EngineOf(d))
	})
}
