// Package conformance is bq's one test suite, run unchanged against every
// database: BQ_TEST_DRIVERS (comma list; default all) selects them, and a
// selected database that is unreachable fails the run.
package conformance

import (
	"testing"
)

type scenario struct {
	name string
	fn   func(t *testing.T, h *harness)
}

var scenarios []scenario

// register adds scenarios to the suite; each file registers its own.
func register(s ...scenario) bool {
	scenarios = append(scenarios, s...)
	return true
}

func TestConformance(t *testing.T) {
	for _, db := range selected(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			for _, s := range scenarios {
				t.Run(s.name, func(t *testing.T) {
					t.Parallel()
					s.fn(t, newHarness(t, db))
				})
			}
		})
	}
}
