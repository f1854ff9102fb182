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

// readOnlyRefusal is a driver for which errReadOnly is the database
// refusing a write for being read-only.
type readOnlyRefusal struct{ driver.Driver }

var errReadOnly = errors.New("cannot execute UPDATE in a read-only transaction")

func (readOnlyRefusal) Refusal(err error) driver.Refusal {
	if errors.Is(err, errReadOnly) {
		return driver.ReadOnly
	}
	return driver.NotRefused
}

// TestRefusedOutageEndsOnlyWithALaterWrite: on a database that turned
// read-only, reads succeed between the refused writes (a claim that
// finds nothing, a dispatcher pass with nothing to write), and a write
// begun before the switch may still commit. None of them ends the
// outage: each process logs the refusal once for its calls and once for
// its dispatcher's passes, and the end of each once, when a write begun
// after the last refusal (a heartbeat) lands. On PostgreSQL set
// read-only under a fleet, a pass with nothing to write logged "database
// calls succeed again" and the next pass the refusal again, as did a
// completion that committed just after a claim was refused. An outage of
// another cause still ends with any call that succeeds.
func TestRefusedOutageEndsOnlyWithALaterWrite(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c := &Runtime{drv: readOnlyRefusal{}, cfg: Config{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}}
	c.log = slog.New(slog.NewTextHandler(&buf, nil))
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	c.dbOK("heartbeat", c.cfg.Now()) // a write before: nothing to end
	inFlight := c.cfg.Now()          // a completion's transaction begins
	advance(10 * time.Millisecond)
	refused := errors.Join(errors.New("claim jobs of queue \"default\""), errReadOnly)
	c.dbFailed("claim jobs of queue default", refused)
	c.passes.failed(c, "dispatcher", refused)
	advance(time.Millisecond)
	c.dbOK("record completions", inFlight) // begun before the switch
	for range 10 {                         // 2.5 s of beats and passes
		advance(250 * time.Millisecond)
		c.passOK() // nothing to write
		c.dbOK("claim jobs", time.Time{})
		c.dbFailed("heartbeat", refused)
		c.passes.failed(c, "dispatcher", refused)
	}
	advance(250 * time.Millisecond)
	c.passOK()
	c.dbOK("heartbeat", c.cfg.Now()) // writable again
	advance(250 * time.Millisecond)
	c.passOK()
	// Another cause: a read shows the database is back.
	c.dbFailed("claim jobs of queue default", errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))
	advance(100 * time.Millisecond)
	c.dbOK("claim jobs", time.Time{})

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d log lines, want 6 (start and end of the refusal for the calls and for the passes, of the other outage):\n%s", len(lines), buf.String())
	}
	for i, want := range [][]string{
		{"level=ERROR", "the database refuses writes (read-only", `service="claim jobs of queue default"`},
		{"level=ERROR", "the database refuses writes (read-only", "service=dispatcher"},
		{"level=WARN", "succeed again", "service=heartbeat", "outage=2.751s", "failed_calls=11"},
		{"level=WARN", "succeed again", "service=dispatcher", "outage=3.001s", "failed_calls=11"},
		{"level=ERROR", "database calls are failing", "connection refused"},
		{"level=WARN", "succeed again", `service="claim jobs"`, "outage=100ms", "failed_calls=1"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i+1, lines[i], w)
			}
		}
	}
}
