package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// The lag a process remembers is the most its rated runs were late by,
// halving every startLagHalfLife; a smaller lag does not lower it.
func TestStartLagRemembersTheMostAndForgets(t *testing.T) {
	var s startLag
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	if got := s.read(t0); got != 0 {
		t.Fatalf("fresh lag %s, want 0", got)
	}
	s.see(t0, 80*time.Millisecond)
	s.see(t0, 10*time.Millisecond)
	if got := s.read(t0); got != 80*time.Millisecond {
		t.Errorf("lag after 80 then 10 ms: %s, want 80ms", got)
	}
	if got := s.read(t0.Add(startLagHalfLife)); got != 40*time.Millisecond {
		t.Errorf("lag a half-life later: %s, want 40ms", got)
	}
	s.see(t0.Add(startLagHalfLife), 50*time.Millisecond)
	if got := s.read(t0.Add(startLagHalfLife)); got != 50*time.Millisecond {
		t.Errorf("lag after a later 50 ms: %s, want 50ms", got)
	}
	if got := s.read(t0.Add(20 * startLagHalfLife)); got > time.Microsecond {
		t.Errorf("lag twenty half-lives later: %s, want about 0", got)
	}
}

// The begin gate records how late after its claim's stamp a rated run
// reached it, late or not, so the process's next claims cover it.
func TestBeginGateRecordsTheLag(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	c := &Runtime{cfg: Config{Now: func() time.Time { return now }, LeaseLost: errors.New("lost")}, log: slog.New(slog.DiscardHandler)}
	p := &process{c: c}
	p.lastBeat.Store(&now)
	gate := func(stamped time.Time, slack time.Duration) error {
		base, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		l := &lease{proc: p, claim: &driver.Claim{StartBy: stamped.Add(slack), StartSlack: slack}, bound: time.Minute, cancel: cancel}
		return MayBegin(gated(runContext{Context: base, lease: l}))
	}
	if err := gate(now.Add(-6*time.Millisecond), 8*time.Millisecond); err != nil {
		t.Fatalf("a run 6 ms after its stamp, slack 8 ms: %v, want to begin", err)
	}
	if got := c.startLag.read(now); got != 6*time.Millisecond {
		t.Errorf("lag after a prompt run: %s, want 6ms", got)
	}
	if err := gate(now.Add(-30*time.Millisecond), 8*time.Millisecond); !errors.Is(err, ErrStartedLate) {
		t.Fatalf("a run 30 ms after its stamp, slack 8 ms: %v, want ErrStartedLate", err)
	}
	if got := c.startLag.read(now); got != 30*time.Millisecond {
		t.Errorf("lag after a late run: %s, want 30ms", got)
	}
}
