package drivertest

import (
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Periodic: the stored schedules, and the conditional advance that makes
// each tick's enqueue happen once.
var _ = add("periodic",
	test{"AdvancePeriodicWinsOnce", func(t *testing.T, f *fixture) {
		f.insertPeriodic("nightly", T0)
		p := driver.AdvanceParams{Name: "nightly", Schedule: "@every 1h0m0s", Was: T0, Next: T0.Add(time.Hour)}
		if won, err := f.ex().PeriodicAdvance(f.ctx, p); err != nil || !won {
			t.Fatalf("first AdvancePeriodic = %v, %v; want the tick won", won, err)
		}
		if won, err := f.ex().PeriodicAdvance(f.ctx, p); err != nil || won {
			t.Errorf("second AdvancePeriodic of the same tick = %v, %v; want it lost", won, err)
		}
		stale := driver.AdvanceParams{Name: "nightly", Schedule: "@every 2h0m0s", Was: T0.Add(time.Hour), Next: T0.Add(3 * time.Hour)}
		if won, err := f.ex().PeriodicAdvance(f.ctx, stale); err != nil || won {
			t.Errorf("AdvancePeriodic under another schedule = %v, %v; want it lost", won, err)
		}
		got := f.periodic()
		if len(got) != 1 {
			t.Fatalf("ListPeriodic = %+v, want nightly", got)
		}
		f.sameTime("next run", got[0].NextRunAt, T0.Add(time.Hour))
	}},
	test{"InsertPeriodicKeepsTheFirst", func(t *testing.T, f *fixture) {
		f.insertPeriodic("nightly", T0)
		again := driver.Periodic{Name: "nightly", Kind: "other", Schedule: "@every 1m0s", NextRunAt: T0, SeenAt: T0}
		if ok, err := f.ex().PeriodicInsert(f.ctx, again); err != nil || ok {
			t.Errorf("InsertPeriodic of a stored name = %v, %v; want false", ok, err)
		}
		got := f.periodic()
		if len(got) != 1 || got[0].Kind != "report" || got[0].LastRunAt != nil || got[0].LastJobID != 0 || got[0].LastState != "" {
			t.Errorf("ListPeriodic = %+v: want the first insert, never run", got)
		}
	}},
	test{"DueLockUpdateRecordPrune", func(t *testing.T, f *fixture) {
		f.insertPeriodic("a", T0)
		f.insertPeriodic("b", T0.Add(time.Minute))
		due, err := f.ex().PeriodicListDue(f.ctx, T0.Add(time.Second))
		f.must(err)
		if len(due) != 1 || due[0].Name != "a" {
			t.Errorf("DuePeriodic = %+v, want only a", due)
		}
		f.tx(func(ex driver.Executor) error {
			rows, err := ex.PeriodicLockMany(f.ctx, []string{"b", "missing"})
			if err == nil && (len(rows) != 1 || rows[0].Name != "b") {
				t.Errorf("LockPeriodic(b, missing) = %+v, want b", rows)
			}
			return err
		})
		f.must(f.ex().PeriodicUpdate(f.ctx, driver.Periodic{Name: "b", Kind: "report2", Schedule: "@every 1m0s",
			NextRunAt: T0.Add(2 * time.Minute), SeenAt: T0.Add(time.Hour)}))
		f.must(f.ex().PeriodicSetLastRun(f.ctx, driver.PeriodicRunParams{Name: "a", At: T0, JobID: 42, State: driver.StateBlocked}))
		got := f.periodic()
		if len(got) != 2 || got[0].LastJobID != 42 || got[0].LastState != driver.StateBlocked || got[0].LastRunAt == nil ||
			got[1].Kind != "report2" || got[1].Schedule != "@every 1m0s" {
			t.Fatalf("ListPeriodic = %+v: want a's run recorded and b updated", got)
		}
		f.sameTime("a's last run", *got[0].LastRunAt, T0)
		f.sameTime("b's seen", got[1].SeenAt, T0.Add(time.Hour))
		f.must(f.ex().PeriodicSetLastRun(f.ctx, driver.PeriodicRunParams{Name: "a", At: T0, JobID: 0, State: driver.StateDiscarded}))
		if got := f.periodic(); got[0].LastJobID != 0 || got[0].LastState != driver.StateDiscarded {
			t.Errorf("after a discarded tick: %+v, want no job, discarded", got[0])
		}
		if n, err := f.ex().PeriodicPrune(f.ctx, T0.Add(time.Minute)); err != nil || n != 1 {
			t.Errorf("PrunePeriodic = %d, %v; want a (seen at T0) pruned", n, err)
		}
		if got := f.periodic(); len(got) != 1 || got[0].Name != "b" {
			t.Errorf("after the prune: %+v, want b", got)
		}
	}},
)

func (f *fixture) insertPeriodic(name string, next time.Time) {
	f.t.Helper()
	ok, err := f.ex().PeriodicInsert(f.ctx, driver.Periodic{Name: name, Kind: "report", Schedule: "@every 1h0m0s",
		NextRunAt: next, SeenAt: T0})
	if err != nil || !ok {
		f.t.Fatalf("InsertPeriodic(%s) = %v, %v", name, ok, err)
	}
}

func (f *fixture) periodic() []driver.Periodic {
	f.t.Helper()
	got, err := f.ex().PeriodicList(f.ctx)
	f.must(err)
	return got
}
