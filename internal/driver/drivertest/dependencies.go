package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Dependencies (DependencyStore): a mark reads how a job ended and is
// seen by the completion that ends it after; a job's edges go to the
// first taker; a waiting row counts down and is a state.
var _ = add("dependencies",
	test{"MarkReadsHowAJobEnded", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q"), job("q"), job("q"), job("q"))
		open, completed, failed, cancelled := ids[0], ids[1], ids[2], ids[3]
		claims := f.claim(f.ex(), "q", 4, 1, T0)
		var done []*driver.Claim
		for _, c := range claims {
			if c.ID == completed {
				done = append(done, c)
			}
		}
		_, err := f.ex().ClaimCompleteMany(f.ctx, done, true, T0)
		f.must(err)
		f.tx(func(ex driver.Executor) error {
			for _, c := range claims {
				switch c.ID {
				case failed:
					if _, err := ex.ClaimDelete(f.ctx, c.ID, c.Fence); err != nil {
						return err
					}
					if err := ex.FailedInsert(f.ctx, c.ID, "boom", T0); err != nil {
						return err
					}
				case cancelled:
					if _, err := ex.ClaimDelete(f.ctx, c.ID, c.Fence); err != nil {
						return err
					}
					if err := ex.JobCancel(f.ctx, driver.JobCancelParams{JobID: c.ID, Now: T0, Ran: true}); err != nil {
						return err
					}
				}
			}
			return nil
		})
		want := map[int64]driver.DependencyEnd{open: driver.DependencyOpen, completed: driver.DependencyCompleted,
			failed: driver.DependencyFailed, cancelled: driver.DependencyFailed}
		for id, end := range want {
			var got driver.DependencyEnd
			var ok bool
			f.tx(func(ex driver.Executor) (err error) {
				got, ok, err = ex.DependencyMark(f.ctx, id)
				return err
			})
			if !ok || got != end {
				t.Errorf("DependencyMark(%d) = %v, %v; want %v", id, got, ok, end)
			}
			if !f.get(id).HasDependents {
				t.Errorf("job %d: HasDependents false after DependencyMark", id)
			}
		}
		f.tx(func(ex driver.Executor) error {
			if _, ok, err := ex.DependencyMark(f.ctx, ids[3]+100); ok || err != nil {
				t.Errorf("DependencyMark of a missing job = %v, %v; want false", ok, err)
			}
			return nil
		})
	}},
	test{"CompletionSeesAMarkMadeWhileItRan", func(t *testing.T, f *fixture) {
		for _, keep := range []bool{true, false} {
			ids := f.insert(T0, job("q"), job("q"))
			claims := f.claim(f.ex(), "q", 2, 1, T0)
			if len(claims) != 2 || claims[0].HasDependents || claims[1].HasDependents {
				t.Fatalf("claims = %+v, want two without dependents", claims)
			}
			f.tx(func(ex driver.Executor) error {
				_, _, err := ex.DependencyMark(f.ctx, ids[0])
				return err
			})
			ended, err := f.ex().ClaimCompleteMany(f.ctx, claims, keep, T0)
			f.must(err)
			got := map[int64]bool{}
			for _, e := range ended {
				got[e.JobID] = e.HasDependents
			}
			if len(got) != 2 || !got[ids[0]] || got[ids[1]] {
				t.Errorf("keep %v: ClaimCompleteMany = %+v; want job %d with dependents, %d without", keep, ended, ids[0], ids[1])
			}
		}
	}},
	test{"DependentsGoToTheFirstTaker", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q"), job("q"), job("q"), job("q"))
		dep := ids[0]
		f.tx(func(ex driver.Executor) error {
			return ex.DependencyInsertMany(f.ctx, []driver.Dependency{{JobID: ids[3], DependsOn: dep, EvenIfFailed: true},
				{JobID: ids[1], DependsOn: dep}, {JobID: ids[2], DependsOn: ids[1]}})
		})
		var took []driver.Dependency
		f.tx(func(ex driver.Executor) (err error) {
			took, err = ex.DependentsTake(f.ctx, dep)
			return err
		})
		want := []driver.Dependency{{JobID: ids[1], DependsOn: dep}, {JobID: ids[3], DependsOn: dep, EvenIfFailed: true}}
		if !slices.Equal(took, want) {
			t.Errorf("DependentsTake = %+v, want %+v", took, want)
		}
		f.tx(func(ex driver.Executor) (err error) {
			took, err = ex.DependentsTake(f.ctx, dep)
			return err
		})
		if len(took) != 0 {
			t.Errorf("DependentsTake again = %+v, want none: the first taker took them", took)
		}
	}},
	test{"WaitingCountsDown", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q"), job("q"), job("q", func(j *driver.NewJob) { j.State = driver.StatePending }))
		w := ids[2]
		at := T0.Add(time.Second)
		f.tx(func(ex driver.Executor) error {
			if err := ex.WaitingInsert(f.ctx, driver.Waiting{JobID: w, Queue: "q", Priority: 3, Pending: 2, Total: 3, At: at}); err != nil {
				return err
			}
			return ex.DependencyInsertMany(f.ctx, []driver.Dependency{{JobID: w, DependsOn: ids[1]}, {JobID: w, DependsOn: ids[0]}})
		})
		f.wantState(driver.StateWaiting, w)
		var got driver.Waiting
		var open []int64
		var ok bool
		f.tx(func(ex driver.Executor) (err error) {
			got, open, ok, err = ex.WaitingGet(f.ctx, w)
			return err
		})
		if !ok || got.Queue != "q" || got.Priority != 3 || got.Pending != 2 || got.Total != 3 || !slices.Equal(open, ids[:2]) {
			t.Errorf("WaitingGet = %+v, %v, %v; want pending 2 of 3, open %v", got, open, ok, ids[:2])
		}
		f.sameTime("waiting since", got.At, at)
		for want := 1; want >= 0; want-- {
			f.tx(func(ex driver.Executor) error {
				left, ok, err := ex.WaitingCountDown(f.ctx, w, 1)
				if !ok || left != want {
					t.Errorf("WaitingCountDown = %d, %v; want %d left", left, ok, want)
				}
				return err
			})
		}
		f.tx(func(ex driver.Executor) error {
			if took, err := ex.ExecutionDelete(f.ctx, driver.StateWaiting, w); !took || err != nil {
				t.Errorf("ExecutionDelete(waiting) = %v, %v; want true", took, err)
			}
			if took, err := ex.ExecutionDelete(f.ctx, driver.StateWaiting, w); took || err != nil {
				t.Errorf("ExecutionDelete(waiting) again = %v, %v; want false", took, err)
			}
			if _, ok, err := ex.WaitingCountDown(f.ctx, w, 1); ok || err != nil {
				t.Errorf("WaitingCountDown of a job no longer waiting = %v, %v; want false", ok, err)
			}
			return nil
		})
	}},
	test{"ListEndedFindsEdgesLeftBehind", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q"), job("q"), job("q"))
		claims := f.claim(f.ex(), "q", 1, 1, T0)
		_, err := f.ex().ClaimCompleteMany(f.ctx, claims, true, T0)
		f.must(err)
		f.tx(func(ex driver.Executor) error {
			return ex.DependencyInsertMany(f.ctx, []driver.Dependency{{JobID: ids[2], DependsOn: ids[0]}, {JobID: ids[2], DependsOn: ids[1]}})
		})
		got, err := f.ex().DependencyListEnded(f.ctx, 10)
		f.must(err)
		if !slices.Equal(got, []int64{claims[0].ID}) {
			t.Errorf("DependencyListEnded = %v, want [%d]: the completed job, not the ready one", got, claims[0].ID)
		}
	}},
	test{"OutputOnlyWhileTheClaimHolds", func(t *testing.T, f *fixture) {
		md := func(j *driver.NewJob) { j.Metadata = []byte(`{"bq.task":"load","bq.workflow":"w1"}`) }
		ids := f.insert(T0, job("q", md))
		claims := f.claim(f.ex(), "q", 1, 1, T0)
		if len(claims) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(claims))
		}
		if out, ok, err := f.ex().JobGetOutput(f.ctx, ids[0]); !ok || out != nil || err != nil {
			t.Errorf("JobGetOutput before any = %q, %v, %v; want nil, true", out, ok, err)
		}
		if ok, err := f.ex().JobSetOutput(f.ctx, ids[0], claims[0].Fence+1, []byte(`1`)); ok || err != nil {
			t.Errorf("JobSetOutput with a stale fence = %v, %v; want false", ok, err)
		}
		if ok, err := f.ex().JobSetOutput(f.ctx, ids[0], claims[0].Fence, []byte(`{"n":42}`)); !ok || err != nil {
			t.Errorf("JobSetOutput = %v, %v; want true", ok, err)
		}
		if out, ok, err := f.ex().JobGetOutput(f.ctx, ids[0]); string(out) != `{"n":42}` || !ok || err != nil {
			t.Errorf("JobGetOutput = %q, %v, %v; want the stored output", out, ok, err)
		}
		if _, ok, err := f.ex().JobGetOutput(f.ctx, ids[0]+1); ok || err != nil {
			t.Errorf("JobGetOutput of a missing job = %v, %v; want false", ok, err)
		}
		if id, ok, err := f.ex().JobFindTask(f.ctx, "w1", "load"); id != ids[0] || !ok || err != nil {
			t.Errorf("JobFindTask = %d, %v, %v; want %d", id, ok, err, ids[0])
		}
		if _, ok, err := f.ex().JobFindTask(f.ctx, "w1", "other"); ok || err != nil {
			t.Errorf("JobFindTask of no task = %v, %v; want false", ok, err)
		}
	}},
)
