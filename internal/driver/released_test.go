package driver

import (
	"testing"
	"time"
)

// TestReleased pins the release interval's rule (every driver's release
// statement follows it): only a release finding the line non-empty
// counts, the first sample is taken whole, later ones weigh min(n, 4)
// quarters, n slots at once share the gap, and an empty line clears the
// last release so an idle gap is never sampled.
func TestReleased(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := time.Millisecond
	for _, c := range []struct {
		name       string
		interval   time.Duration
		last       time.Time
		blocked, n int
		now        time.Time
		want       time.Duration
		wantLast   time.Time
	}{
		{"empty line clears last", 50 * ms, t0, 0, 1, t0.Add(time.Hour), 50 * ms, time.Time{}},
		{"first release with a line: no sample", 0, time.Time{}, 3, 1, t0, 0, t0},
		{"first sample taken whole", 0, t0, 3, 1, t0.Add(80 * ms), 80 * ms, t0.Add(80 * ms)},
		{"later sample weighs a quarter", 80 * ms, t0, 3, 1, t0.Add(160 * ms), 100 * ms, t0.Add(160 * ms)},
		{"n slots share the gap and weigh n quarters", 40 * ms, t0, 3, 2, t0.Add(240 * ms), 80 * ms, t0.Add(240 * ms)},
		{"weight at most 4 quarters", 80 * ms, t0, 30, 20, t0.Add(400 * ms), 20 * ms, t0.Add(400 * ms)},
		{"no time passed: no sample", 80 * ms, t0, 3, 1, t0, 80 * ms, t0},
		{"never below 1µs", 0, t0, 3, 5, t0.Add(time.Microsecond), time.Microsecond, t0.Add(time.Microsecond)},
	} {
		iv, last := Released(c.interval, c.last, c.blocked, c.n, c.now)
		if iv != c.want || !last.Equal(c.wantLast) {
			t.Errorf("%s: Released = %s, %s; want %s, %s", c.name, iv, last, c.want, c.wantLast)
		}
	}
	if w := ExpectedWait(10, 240*ms); w != 2400*ms {
		t.Errorf("ExpectedWait(10, 240ms) = %s, want 2.4s", w)
	}
}
