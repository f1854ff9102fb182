package driver_test

import (
	"testing"

	"github.com/bqueue/bq/internal/driver"
)

// TestLowered: a throttle takes a limit down by a quarter, by one at
// least, never below the floor nor 1 (a key's slots and a rate's starts
// alike).
func TestLowered(t *testing.T) {
	for _, c := range []struct{ cur, floor, want int }{
		{12, 1, 9}, {10, 1, 8}, {6, 1, 5}, {5, 1, 4}, {4, 1, 3}, {3, 1, 2}, {2, 1, 1}, {1, 1, 1}, {12, 10, 10}, {4, 5, 5},
	} {
		if got := driver.Lowered(c.cur, c.floor); got != c.want {
			t.Errorf("Lowered(%d, floor %d) = %d, want %d", c.cur, c.floor, got, c.want)
		}
	}
}
