package drivertest

import (
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Cancel: taking a job out of the one state table it is in, finishing it
// cancelled, and the cancel mark a running job's claim carries.
var _ = add("cancel",
	test{"DeleteExecutionTakesOnlyThatState", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q", keyed("k", 1)), job("q", keyed("k", 1), blocked), job("q", dueAt(T0.Add(time.Hour))),
			job("q", prio(9)))
		failed := ids[3]
		claimed := f.claim(f.ex(), "q", 1, 1, T0)
		if len(claimed) != 1 || claimed[0].ID != failed {
			t.Fatalf("claimed %v, want job %d", claimIDs(claimed), failed)
		}
		f.tx(func(ex driver.Executor) error {
			if _, err := ex.ClaimDelete(f.ctx, failed, claimed[0].Fence); err != nil {
				return err
			}
			return ex.FailedInsert(f.ctx, failed, "boom", T0)
		})
		want := map[int64]driver.JobState{ids[0]: driver.StateReady, ids[1]: driver.StateBlocked, ids[2]: driver.StateScheduled, failed: driver.StateFailed}
		for id, state := range want {
			for _, other := range []driver.JobState{driver.StateReady, driver.StateBlocked, driver.StateScheduled, driver.StateFailed} {
				if other == state {
					continue
				}
				if ok, err := f.ex().ExecutionDelete(f.ctx, other, id); err != nil || ok {
					t.Errorf("DeleteExecution(%s) of a %s job = %v, %v; want false: it is not in that table", other, state, ok, err)
				}
			}
			if ok, err := f.ex().ExecutionDelete(f.ctx, state, id); err != nil || !ok {
				t.Errorf("DeleteExecution(%s) of a %s job = %v, %v; want true", state, state, ok, err)
			}
			if ok, err := f.ex().ExecutionDelete(f.ctx, state, id); err != nil || ok {
				t.Errorf("second DeleteExecution(%s) = %v, %v; want false", state, ok, err)
			}
		}
		f.wantState("", ids...)
		if _, err := f.ex().ExecutionDelete(f.ctx, driver.StateRunning, ids[0]); err == nil {
			t.Error("DeleteExecution(running) = nil error, want one: a claim ends by its fence (DeleteClaim)")
		}
	}},
	test{"CancelJobFinishesCancelled", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q"), job("q"))
		f.must(f.ex().JobFailAttempt(f.ctx, ids[0], "earlier"))
		for _, id := range ids {
			if ok, err := f.ex().ExecutionDelete(f.ctx, driver.StateReady, id); err != nil || !ok {
				t.Fatalf("take job %d out of ready: %v, %v", id, ok, err)
			}
		}
		at := T0.Add(time.Minute)
		f.must(f.ex().JobCancel(f.ctx, driver.JobCancelParams{JobID: ids[0], Now: at, Ran: false, Msg: ""}))
		f.must(f.ex().JobCancel(f.ctx, driver.JobCancelParams{JobID: ids[1], Now: at, Ran: true, Msg: "why"}))
		for i, want := range []struct {
			attempt int
			err     string
		}{{1, "earlier"}, {1, "why"}} {
			got := f.get(ids[i])
			if got.State != driver.StateCancelled || got.FinishedAt == nil || got.Attempt != want.attempt || got.LastError != want.err {
				t.Errorf("job %d: %s, finished %v, attempt %d, error %q; want cancelled at %v, attempt %d, error %q",
					ids[i], got.State, got.FinishedAt, got.Attempt, got.LastError, at, want.attempt, want.err)
			} else {
				f.sameTime("finished_at", *got.FinishedAt, at)
			}
		}
	}},
	test{"MarkCancelKeepsTheFirstMark", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q"), job("q"), job("q"))
		pid := f.process("w", T0, time.Second, time.Minute)
		claims := f.claim(f.ex(), "q", 2, pid, T0)
		marked, plain := claims[0], claims[1]
		mark := func(id int64, at time.Time) (got time.Time, ok bool) {
			f.tx(func(ex driver.Executor) (err error) {
				got, ok, err = ex.ClaimMarkCancel(f.ctx, id, at)
				return err
			})
			return got, ok
		}
		first := T0.Add(time.Second)
		if at, ok := mark(marked.ID, first); !ok || !at.Equal(first) {
			t.Errorf("MarkCancel = %v, %v; want %v, true", at, ok, first)
		}
		if at, ok := mark(marked.ID, first.Add(time.Minute)); !ok || !at.Equal(first) {
			t.Errorf("second MarkCancel = %v, %v; want the first mark %v kept", at, ok, first)
		}
		if _, ok := mark(ids[2], first); ok {
			t.Errorf("MarkCancel of a ready job = true, want false: it has no claim")
		}
		f.wantState(driver.StateRunning, marked.ID, plain.ID)
		f.wantState(driver.StateReady, ids[2])
		own, err := f.ex().ClaimListOfProcess(f.ctx, pid)
		f.must(err)
		for _, c := range own {
			if want := c.JobID == marked.ID; c.CancelRequested != want {
				t.Errorf("ClaimsOfProcess: job %d CancelRequested %v, want %v", c.JobID, c.CancelRequested, want)
			}
		}
		f.sameTime("JobExecution's CancelRequestedAt", f.execution(marked.ID).CancelRequestedAt, first)
		if x := f.execution(plain.ID); !x.CancelRequestedAt.IsZero() {
			t.Errorf("unmarked claim's CancelRequestedAt = %v, want zero", x.CancelRequestedAt)
		}
		for _, c := range []struct {
			id, fence int64
			want      bool
		}{{marked.ID, marked.Fence, true}, {marked.ID, marked.Fence + 100, false}, {plain.ID, plain.Fence, false}} {
			var got bool
			f.tx(func(ex driver.Executor) (err error) {
				got, err = ex.ClaimCancelRequested(f.ctx, c.id, c.fence)
				return err
			})
			if got != c.want {
				t.Errorf("CancelRequested(%d, fence %d) = %v, want %v", c.id, c.fence, got, c.want)
			}
		}
	}},
	test{"CancelRequestedHoldsOffAMark", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		f.insert(T0, job("q"))
		c := f.claim(f.ex(), "q", 1, 1, T0)[0]
		tx := f.begin()
		if marked, err := tx.ClaimCancelRequested(f.ctx, c.ID, c.Fence); err != nil || marked {
			t.Fatalf("CancelRequested = %v, %v; want false", marked, err)
		}
		var ok bool
		waiting, wait := waits(func() error {
			return driver.InTx(f.ctx, f.d, func(ex driver.Executor) (err error) {
				_, ok, err = ex.ClaimMarkCancel(f.ctx, c.ID, T0)
				return err
			})
		})
		if !waiting {
			t.Error("MarkCancel did not wait for the transaction that read the claim's mark: a run's end could miss it")
		}
		if _, err := tx.ClaimDelete(f.ctx, c.ID, c.Fence); err != nil {
			t.Fatal(err)
		}
		f.must(tx.Commit(f.ctx))
		f.must(wait())
		if ok {
			t.Error("MarkCancel after the run ended = true, want false: the claim is gone")
		}
	}},
)
