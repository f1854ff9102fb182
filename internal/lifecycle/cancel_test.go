package lifecycle_test

import (
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/lifecycle"
)

func cancel(t *testing.T, s *memstore.Store, id int64) lifecycle.Cancellation {
	t.Helper()
	c, err := lifecycle.Cancel(ctx, s, id, now)
	if err != nil {
		t.Fatal(err)
	}
	honest(t, s, "k")
	return c
}

// TestCancelReadyPassesTheSlotOn: a cancelled ready holder's slot goes to
// the first blocked job in the same step; a blocked job leaves the line.
func TestCancelReadyPassesTheSlotOn(t *testing.T) {
	s := memstore.New()
	v := []*driver.NewJob{job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 0)}
	if got := states(enqueue(t, s, v...)); got != "ready,blocked,blocked" {
		t.Fatalf("enqueue: %s", got)
	}
	if c := cancel(t, s, v[1].ID); c.State != driver.StateCancelled || c.Promoted.Jobs != 0 {
		t.Errorf("cancel a blocked job: %+v, want cancelled, nothing promoted", c)
	}
	c := cancel(t, s, v[0].ID)
	if c.State != driver.StateCancelled || c.Promoted.Jobs != 1 || s.Jobs[v[2].ID].State != driver.StateReady {
		t.Errorf("cancel the holder: %+v, the last job %s; want cancelled, and the last job promoted (the cancelled one skipped)",
			c, s.Jobs[v[2].ID].State)
	}
	if c := cancel(t, s, v[0].ID); !c.Finished || c.State != driver.StateCancelled {
		t.Errorf("cancel again: %+v, want Finished", c)
	}
}

// TestCancelRunningKeepsTheSlotUntilTheRunEnds: a running job's claim is
// marked and its slot kept; a failing end then finishes it cancelled and
// releases, where without the mark it would be retried.
func TestCancelRunningKeepsTheSlotUntilTheRunEnds(t *testing.T) {
	s := memstore.New()
	v := []*driver.NewJob{job("k", 1, driver.Block, 0), job("k", 1, driver.Block, 0)}
	enqueue(t, s, v...)
	cl := claim(t, s)
	c := cancel(t, s, cl.ID)
	if c.State != driver.StateRunning || c.RequestedAt.IsZero() || s.Jobs[v[1].ID].State != driver.StateBlocked {
		t.Fatalf("cancel a running job: %+v, the next %s; want running with a mark, the next still blocked", c, s.Jobs[v[1].ID].State)
	}
	r, err := lifecycle.Retry(ctx, s, cl, "context canceled", now.Add(time.Minute), now)
	if err != nil || r.State != driver.StateCancelled || s.Jobs[v[1].ID].State != driver.StateReady {
		t.Errorf("failing end of a marked run: %+v %v, the next %s; want cancelled and the next promoted", r, err, s.Jobs[v[1].ID].State)
	}
	honest(t, s, "k")
}
