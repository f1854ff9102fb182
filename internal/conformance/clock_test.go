package conformance

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

var _ = register(
	scenario{"ClockSkewIsWarned", testClockSkewWarned},
)

// testClockSkewWarned: a process whose injected clock (Config.Now, used
// as given) lags the database server's by 31 s (ProcessDeadAfter 10 s
// here) says so when it starts, naming the risk (reaped while alive);
// one in step says nothing. SQLite has no
// clock of its own (its clock is its host's): nothing to compare, nothing
// said.
func testClockSkewWarned(t *testing.T, h *harness) {
	for _, tc := range []struct {
		name string
		skew time.Duration
		warn bool
	}{{"lagging", -31 * time.Second, h.db != "sqlite"}, {"in step", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var out lockedBuffer
			cfg := testConfig()
			cfg.Logger = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))
			cfg.Now = func() time.Time { return time.Now().Add(tc.skew) }
			c := h.clientWith(cfg)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			if tc.warn {
				deadline := time.Now().Add(5 * time.Second)
				for time.Now().Before(deadline) && !strings.Contains(out.String(), "is behind the database's") {
					time.Sleep(50 * time.Millisecond)
				}
			} else {
				time.Sleep(time.Second) // its first comparison is made at the start
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			warned := strings.Contains(out.String(), "is behind the database's")
			if warned != tc.warn {
				t.Errorf("clock %s the database's by %s on %s: warned %v, want %v:\n%s", tc.name, -tc.skew, h.db, warned, tc.warn, out.String())
			}
			if warned && !strings.Contains(out.String(), "reaped while alive") {
				t.Errorf("the warning does not say what the skew risks:\n%s", out.String())
			}
		})
	}
}
