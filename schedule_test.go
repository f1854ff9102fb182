package bq

import (
	"strings"
	"testing"
	"time"
)

// Every ticks on multiples of d since the epoch, whatever the time asked
// from, so processes started at different times agree.
func TestEveryIsAligned(t *testing.T) {
	s := Every(15 * time.Minute)
	for _, from := range []time.Time{
		time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 1, 10, 7, 13, 5, time.UTC),
		time.Date(2026, 12, 1, 11, 14, 59, 0, time.FixedZone("x", 3600)),
	} {
		if got, want := s.Next(from), time.Date(2026, 12, 1, 10, 15, 0, 0, time.UTC); !got.Equal(want) {
			t.Errorf("Every(15m).Next(%s) = %s, want %s", from, got, want)
		}
	}
	if s.String() != "@every 15m0s" {
		t.Errorf("Every(15m) reads %q", s)
	}
}

// Cron ticks in its zone, UTC by default; around a daylight-saving
// change it follows robfig/cron (docs/periodic.md says so): a skipped wall
// time does not fire that day, a repeated one fires twice. A library
// upgrade changing that fails here.
func TestCronZonesAndDaylightSaving(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database")
	}
	if got := Cron("0 3 * * *", nil).Next(time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)); !got.Equal(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)) {
		t.Errorf("0 3 * * * without a zone next after 04:00 UTC = %s, want 03:00 UTC tomorrow", got)
	}
	s := Cron("30 2 * * *", paris)
	if !strings.HasPrefix(s.String(), "CRON_TZ=Europe/Paris ") {
		t.Errorf("Cron in Paris reads %q", s)
	}
	ticks := func(from time.Time, n int) []time.Time {
		var out []time.Time
		for range n {
			from = s.Next(from)
			out = append(out, from.UTC())
		}
		return out
	}
	// Spring forward, 28 March 2027: 02:30 does not exist that night.
	spring := ticks(time.Date(2027, 3, 27, 12, 0, 0, 0, paris), 1)
	if want := time.Date(2027, 3, 29, 0, 30, 0, 0, time.UTC); !spring[0].Equal(want) {
		t.Errorf("after 27 March the next 02:30 Paris is %s, want %s (the 28th's is skipped)", spring[0], want)
	}
	// Fall back, 25 October 2026: 02:30 happens twice.
	fall := ticks(time.Date(2026, 10, 24, 12, 0, 0, 0, paris), 3)
	want := []time.Time{time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC),
		time.Date(2026, 10, 26, 1, 30, 0, 0, time.UTC)}
	for i := range want {
		if !fall[i].Equal(want[i]) {
			t.Errorf("fall-back ticks %v, want %v", fall, want)
			break
		}
	}
}

// A Cron error quotes the expression as written: the CRON_TZ= prefix bq
// adds for the zone is none of the user's.
func TestCronErrorQuotesTheExpression(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database")
	}
	for _, tc := range []struct {
		expr string
		loc  *time.Location
		want string
	}{
		{"0 3 * *", nil, `bq.Cron("0 3 * *"): expected exactly 5 fields, found 4`},
		{"0 3 * *", paris, `bq.Cron("0 3 * *"): expected exactly 5 fields, found 4`},
		{"0 0 30 2 *", nil, `bq.Cron("0 0 30 2 *"): it never fires`},
		{"0 0 30 2 *", paris, `bq.Cron("0 0 30 2 *"): it never fires`},
	} {
		s := Cron(tc.expr, tc.loc)
		if s.err == nil || !strings.Contains(s.err.Error(), tc.want) || strings.Contains(s.err.Error(), "CRON_TZ") {
			t.Errorf("Cron(%q, %v) = %v, want an error with %q and no CRON_TZ", tc.expr, tc.loc, s.err, tc.want)
		}
	}
}
