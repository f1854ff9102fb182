package worker

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// noRefusal is a driver whose errors are never the database refusing
// writes.
type noRefusal struct{ driver.Driver }

func (noRefusal) Refusal(error) driver.Refusal { return driver.NotRefused }

// TestOutageLoggedOnce: an outage in which every poll of every queue fails
// is logged once when it starts, with the cause, once every outageReport
// while it lasts, with the count, and once when it ends, with its length.
func TestOutageLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c := &Runtime{drv: noRefusal{}, cfg: Config{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}}
	c.log = slog.New(slog.NewTextHandler(&buf, nil))
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	c.dbOK("claim jobs", time.Time{}) // nothing to end
	cause := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	for range 30 { // 30 s of polls of three queues, a second apart
		for _, q := range []string{"a", "b", "c"} {
			c.dbFailed("claim jobs of queue "+q, cause)
		}
		advance(time.Second)
	}
	c.dbFailed("heartbeat", cause) // 30 s in: the periodic report
	advance(1500 * time.Millisecond)
	c.dbOK("heartbeat", c.cfg.Now())
	c.dbOK("claim jobs", c.cfg.Now())

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines for one 31.5 s outage, want 3 (start, one report, end):\n%s", len(lines), buf.String())
	}
	for i, want := range [][]string{
		{"level=ERROR", "database calls are failing", "connection refused", "claim jobs of queue a"},
		{"level=ERROR", "still failing", "for=30s", "failed_calls=91"},
		{"level=WARN", "succeed again", "outage=31.5s", "failed_calls=91"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i+1, lines[i], w)
			}
		}
	}
}
