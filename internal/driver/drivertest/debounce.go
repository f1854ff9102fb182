package drivertest

import (
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// A debounced enqueue joining its key's waiting job (ScheduledDebounce).
var _ = add("debounce",
	test{"ScheduledDebounceMovesAWaitingJob", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q", keyed("g/d", 1), dueAt(T0.Add(10*time.Second)), named("first")),
			job("q", keyed("g/d", 1), named("ready")))
		waiting, ready := ids[0], ids[1]
		move := func(p driver.DebounceParams) (ok bool) {
			f.tx(func(ex driver.Executor) (err error) {
				ok, err = ex.ScheduledDebounce(f.ctx, p)
				return err
			})
			return ok
		}
		// Still waiting at T0+5s: moved to T0+20s with the new args.
		if !move(driver.DebounceParams{JobID: waiting, At: T0.Add(20 * time.Second), Now: T0.Add(5 * time.Second), Args: []byte(`{"n":"last"}`)}) {
			t.Fatal("ScheduledDebounce of a waiting job = false, want true")
		}
		got := f.get(waiting)
		f.sameTime("its due time", got.ScheduledAt, T0.Add(20*time.Second))
		if !sameJSON(got.Args, []byte(`{"n":"last"}`)) {
			t.Errorf("its args = %s, want the new ones", got.Args)
		}
		f.wantState(driver.StateScheduled, waiting)
		// Without args: only the due time moves.
		if !move(driver.DebounceParams{JobID: waiting, At: T0.Add(25 * time.Second), Now: T0.Add(6 * time.Second)}) {
			t.Fatal("ScheduledDebounce without args = false, want true")
		}
		if got := f.get(waiting); !sameJSON(got.Args, []byte(`{"n":"last"}`)) {
			t.Errorf("args after a move without args = %s, want kept", got.Args)
		}
		// Due by then (the dispatcher may be taking it): nothing changes.
		if move(driver.DebounceParams{JobID: waiting, At: T0.Add(40 * time.Second), Now: T0.Add(25 * time.Second), Args: []byte(`{"n":"late"}`)}) {
			t.Error("ScheduledDebounce of a job due at Now = true, want false")
		}
		got = f.get(waiting)
		f.sameTime("a due job's time", got.ScheduledAt, T0.Add(25*time.Second))
		if !sameJSON(got.Args, []byte(`{"n":"last"}`)) {
			t.Errorf("a due job's args = %s, want unchanged", got.Args)
		}
		// Not scheduled, or gone: false.
		if move(driver.DebounceParams{JobID: ready, At: T0.Add(time.Minute), Now: T0}) {
			t.Error("ScheduledDebounce of a ready job = true, want false")
		}
		if move(driver.DebounceParams{JobID: ready + 1000, At: T0.Add(time.Minute), Now: T0}) {
			t.Error("ScheduledDebounce of no job = true, want false")
		}
		// The moved job comes due at its new time, not before.
		var due []*driver.Job
		f.tx(func(ex driver.Executor) (err error) {
			due, err = ex.ScheduledTakeDue(f.ctx, T0.Add(24*time.Second), 10)
			return err
		})
		if len(due) != 0 {
			t.Errorf("taken due at T0+24s: %d jobs, want none (moved to T0+25s)", len(due))
		}
	}},
)
