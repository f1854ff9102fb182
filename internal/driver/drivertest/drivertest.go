// Package drivertest pins, method by method, the contract of
// driver.Executor that package driver states in prose: each driver runs
// Exercise from its own tests, beside the scenario suite
// (internal/conformance), which checks the engine's behaviour end to end.
//
// Every test gets a fresh, migrated, empty database from the driver's
// open function and works at fixed times (T0 and offsets from it), never
// the wall clock, so what a test sees depends only on the rows it wrote.
// A test that needs row locks (a second transaction skipping or waiting
// for rows the first holds) is skipped on SQLite, whose write
// transactions take the database's one write lock at BEGIN instead.
//
// A driver's tests run it on fresh databases from internal/testdb:
//
//	func TestDriverContract(t *testing.T) {
//		testdb.Require(t, testdb.Postgres)
//		drivertest.Exercise(t, func(t *testing.T) driver.Driver {
//			d, err := postgres.Open(context.Background(), testdb.FreshPostgres(t))
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { d.Close() })
//			return drivertest.Migrate(t, d)
//		})
//	}
package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/testdb"
	"github.com/bqueue/bq/migrations"
)

// T0 is the fixed instant the tests' times count from. Whole
// milliseconds: every database stores at least microseconds.
var T0 = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

// test is one contract check; area is the file it is written in.
type test struct {
	name string
	fn   func(t *testing.T, f *fixture)
}

var tests []test

// add registers an area's tests; each file adds its own.
func add(area string, ts ...test) bool {
	for _, tc := range ts {
		tc.name = area + "/" + tc.name
		tests = append(tests, tc)
	}
	return true
}

// Exercise runs every contract test against the driver open returns: a
// driver on a fresh, migrated, empty database of the test's own (see
// Migrate). open may be called more than once by one test.
func Exercise(t *testing.T, open func(t *testing.T) driver.Driver) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newFixture(t, open))
		})
	}
}

// Migrate applies bq's migrations to d's database with d's prefix and
// returns d, for open functions.
func Migrate(t *testing.T, d driver.Driver) driver.Driver {
	t.Helper()
	p, err := migrations.NewProvider(d.SQLDB(), string(d.Dialect()), d.Prefix())
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if _, err := p.Up(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return d
}

// ExerciseDatabase runs Exercise on fresh databases of kind (a
// testdb kind: sqlite, postgres, mysql), opened through the driver the
// test binary registered for that DSN scheme: a driver's own test only
// names its kind. It skips when BQ_TEST_DRIVERS leaves kind out.
func ExerciseDatabase(t *testing.T, kind string) {
	testdb.Require(t, kind)
	open, ok := driver.OpenerOf(kind)
	if !ok {
		t.Fatalf("no driver registered for %s: import its package in the test", kind)
	}
	Exercise(t, func(t *testing.T) driver.Driver {
		d, err := open(context.Background(), testdb.Fresh(t, kind))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		e := Migrate(t, driver.EngineOf(d))
		testdb.CheckReadyKeys(t, kind, e.SQLDB(), e.Prefix())
		return e
	})
}
