// Package conformance is bq's one test suite, run unchanged against every
// database: BQ_TEST_DRIVERS (comma list; default all) selects them, and a
// selected database that is unreachable fails the run.
package conformance

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
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
	t.Cleanup(func() { writeTimings(t, os.Getenv("BQ_TEST_TIMINGS")) })
	for _, db := range selected(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			for _, s := range scenarios {
				t.Run(s.name, func(t *testing.T) {
					t.Parallel()
					began := time.Now()
					// Registered first, it runs last: after the
					// scenario's own cleanups stopped its processes.
					t.Cleanup(func() { timed(db.name+"/"+s.name, time.Since(began)) })
					s.fn(t, newHarness(t, db))
				})
			}
		})
	}
}

// timings are the scenarios' wall times, slowest first once written.
var timings struct {
	sync.Mutex
	runs []timing
}

type timing struct {
	name string
	took time.Duration
}

func timed(name string, took time.Duration) {
	timings.Lock()
	defer timings.Unlock()
	timings.runs = append(timings.runs, timing{name, took})
}

// writeTimings writes each scenario's wall time to path (BQ_TEST_TIMINGS;
// none when empty), slowest first: what makes the suite long. make test
// prints the head of it.
func writeTimings(t *testing.T, path string) {
	if path == "" {
		return
	}
	timings.Lock()
	defer timings.Unlock()
	slices.SortFunc(timings.runs, func(a, b timing) int { return cmp.Compare(b.took, a.took) })
	var out []byte
	for _, r := range timings.runs {
		out = fmt.Appendf(out, "%7.1fs  %s\n", r.took.Seconds(), r.name)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Errorf("write the scenarios' timings: %v", err)
	}
}
