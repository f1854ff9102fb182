package bq

import (
	"math"
	"testing"
)

// jain is 1 when every key runs its share, 1/n when one of n keys runs
// everything, and 1 with nothing running.
func TestJain(t *testing.T) {
	for _, tc := range []struct {
		shares []KeyShare
		want   float64
	}{
		{[]KeyShare{{Running: 2, Share: 2}, {Running: 6, Share: 6}}, 1},
		{[]KeyShare{{Running: 4, Share: 2}, {Running: 0, Share: 2}}, 0.5},
		{[]KeyShare{{Running: 0, Share: 2}, {Running: 0, Share: 2}}, 1},
		{[]KeyShare{{Running: 3, Share: 1}, {Running: 0, Share: 1}, {Running: 0, Share: 1}}, 1.0 / 3},
	} {
		if got := jain(tc.shares); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("jain(%+v) = %v, want %v", tc.shares, got, tc.want)
		}
	}
}
