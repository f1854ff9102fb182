package drivertest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

// Claims: taking ready jobs, and ending claims only when their fence
// still matches.
var _ = add("claims",
	test{"ClaimReadyPriorityThenFIFO", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q", prio(0)), job("q", prio(5)), job("q", prio(0)), job("q", prio(5)),
			job("q", prio(9)), job("other", prio(99)))
		now := T0.Add(time.Second)
		first := f.claim(f.ex(), "q", 3, 7, now)
		rest := f.claim(f.ex(), "q", 10, 7, now)
		if got, want := sorted(claimIDs(first)), sorted([]int64{ids[4], ids[1], ids[3]}); !slices.Equal(got, want) {
			t.Errorf("first claim of 3 took %v, want the highest priorities, oldest first: %v", got, want)
		}
		if got, want := sorted(claimIDs(rest)), []int64{ids[0], ids[2]}; !slices.Equal(got, want) {
			t.Errorf("second claim took %v, want the rest of the queue: %v", got, want)
		}
		fences := map[int64]bool{}
		for _, c := range append(first, rest...) {
			if c.Queue != "q" || !c.ClaimedAt.Equal(now) || fences[c.Fence] {
				t.Errorf("claim of job %d: queue %q, claimed at %v, fence %d (seen: %v); want q, %v, a fence of its own",
					c.ID, c.Queue, c.ClaimedAt, c.Fence, fences[c.Fence], now)
			}
			fences[c.Fence] = true
		}
		f.wantState(driver.StateRunning, claimIDs(first)...)
		f.wantState(driver.StateReady, ids[5])
		if more := f.claim(f.ex(), "q", 10, 7, now); len(more) != 0 {
			t.Errorf("claim of an empty queue took %v", claimIDs(more))
		}
	}},
	test{"ClaimReadyFIFOAmongEquals", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, jobs(20, "q")...)
		for i := 0; i < len(ids); i += 4 {
			if got := sorted(claimIDs(f.claim(f.ex(), "q", 4, 1, T0))); !slices.Equal(got, ids[i:i+4]) {
				t.Fatalf("claim %d took %v, want the oldest four: %v", i/4, got, ids[i:i+4])
			}
		}
	}},
	test{"ClaimReadySkipsRowsAnotherTransactionHolds", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		ids := f.insert(T0, job("q", prio(1)), job("q"), job("q"))
		tx := f.begin()
		held := f.claim(tx, "q", 1, 1, T0)
		if len(held) != 1 || held[0].ID != ids[0] {
			t.Fatalf("open transaction claimed %v, want job %d", claimIDs(held), ids[0])
		}
		got, err := f.ex().ReadyClaim(f.quick(), driver.ClaimParams{Queue: "q", Max: 3, ProcessID: 2, Now: T0})
		if err != nil {
			t.Fatalf("claim beside an open transaction: %v (it must skip the rows that one holds, not wait)", err)
		}
		if got := sorted(claimIDs(got)); !slices.Equal(got, ids[1:]) {
			t.Errorf("claim beside an open transaction took %v, want the two rows it does not hold: %v", got, ids[1:])
		}
		f.must(tx.Rollback(f.ctx))
		if again := f.claim(f.ex(), "q", 3, 2, T0); len(again) != 1 || again[0].ID != ids[0] {
			t.Errorf("after the rollback a claim took %v, want the released job %d", claimIDs(again), ids[0])
		}
	}},
	// MaxActive is the engine's rule (lifecycle.Claim) on the driver's
	// primitives: QueueCap locked in the claim's transaction, RunningSlots,
	// an uncapped ReadyClaim.
	test{"ClaimKeepsWithinMaxActive", func(t *testing.T, f *fixture) {
		f.insert(T0, append(jobs(6, "capped"), jobs(3, "free")...)...)
		ok, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "capped", Namespace: "ns", MaxActive: 2, UpdatedAt: T0})
		f.must(err)
		if !ok {
			t.Fatal("InsertPolicy: false on an empty table")
		}
		first := f.engineClaim("capped", 5, 1, T0)
		if len(first) != 2 {
			t.Fatalf("claim of 5 from a queue capped at 2 took %d", len(first))
		}
		if more := f.engineClaim("capped", 5, 1, T0); len(more) != 0 {
			t.Errorf("claim at the cap took %d more", len(more))
		}
		if free := f.engineClaim("free", 5, 1, T0); len(free) != 3 {
			t.Errorf("claim of an uncapped queue took %d of 3", len(free))
		}
		if ok, err := f.ex().ClaimDelete(f.ctx, first[0].ID, first[0].Fence); err != nil || !ok {
			t.Fatalf("DeleteClaim: %v, %v", ok, err)
		}
		if next := f.engineClaim("capped", 5, 1, T0); len(next) != 1 {
			t.Errorf("claim after one claim ended took %d, want the one freed place", len(next))
		}
	}},
	// A claim says when the cap, not an empty queue, made it short
	// (ClaimParams.Capped): its worker then claims again as its runs
	// end, rather than waiting for new work to be announced.
	test{"ClaimSaysWhenTheCapBinds", func(t *testing.T, f *fixture) {
		f.insert(T0, append(jobs(6, "capped"), jobs(2, "free")...)...)
		_, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "capped", Namespace: "ns", MaxActive: 3, UpdatedAt: T0})
		f.must(err)
		claim := func(q string, max int) (int, bool) {
			t.Helper()
			var capped bool
			claims, err := lifecycle.Claim(f.ctx, f.d, driver.ClaimParams{Queue: q, Max: max, ProcessID: 1, Now: T0, Capped: &capped})
			f.must(err)
			return len(claims), capped
		}
		for _, c := range []struct {
			queue     string
			max, want int
			capped    bool
		}{
			{"capped", 2, 2, false}, // room 3 for 2: the cap does not bind
			{"capped", 5, 1, true},  // room 1 for 5
			{"capped", 5, 0, true},  // at the cap
			{"free", 5, 2, false},   // uncapped and drained
			{"free", 5, 0, false},
		} {
			if n, capped := claim(c.queue, c.max); n != c.want || capped != c.capped {
				t.Errorf("claim of %d from %q: %d jobs, capped %v; want %d, capped %v", c.max, c.queue, n, capped, c.want, c.capped)
			}
		}
	}},
	// A job of k slots counts k against its queue's MaxActive, and one
	// that does not fit keeps its place: the lighter jobs behind it wait.
	test{"ClaimKeepsWithinMaxActiveBySlots", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("capped", slots(2)), job("capped", slots(2)), job("capped"))
		_, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "capped", Namespace: "ns", MaxActive: 3, UpdatedAt: T0})
		f.must(err)
		first := f.engineClaim("capped", 5, 1, T0)
		if got := claimIDs(first); !slices.Equal(got, ids[:1]) {
			t.Fatalf("claim of a queue capped at 3 slots took %v, want %v: the second job's 2 slots do not fit beside the first's", got, ids[:1])
		}
		if more := f.engineClaim("capped", 5, 1, T0); len(more) != 0 {
			t.Errorf("with 1 slot of the cap left, a claim took %v: the head needs 2, and the 1-slot job behind it must wait", claimIDs(more))
		}
		if ok, err := f.ex().ClaimDelete(f.ctx, first[0].ID, first[0].Fence); err != nil || !ok {
			t.Fatalf("ClaimDelete: %v, %v", ok, err)
		}
		if got := claimIDs(f.engineClaim("capped", 5, 1, T0)); !slices.Equal(got, ids[1:]) {
			t.Errorf("claim after the first job ended took %v, want %v (2 + 1 slots)", got, ids[1:])
		}
	}},
	test{"ClaimMaxActiveHoldsAcrossConcurrentClaimers", func(t *testing.T, f *fixture) {
		f.insert(T0, jobs(20, "capped")...)
		_, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "capped", Namespace: "ns", MaxActive: 3, UpdatedAt: T0})
		f.must(err)
		counts := make([]int, 8)
		f.must(together(len(counts), func(i int) error {
			claims, err := lifecycle.Claim(f.ctx, f.d, driver.ClaimParams{Queue: "capped", Max: 2, ProcessID: int64(i + 1), Now: T0})
			counts[i] = len(claims)
			return err
		}))
		total := 0
		for _, n := range counts {
			total += n
		}
		if total != 3 {
			t.Errorf("8 claimers at once took %d jobs of a queue capped at 3 (%v): claimers must take turns", total, counts)
		}
	}},
	test{"DeleteClaimMatchesTheFence", func(t *testing.T, f *fixture) {
		id := f.insert(T0, job("q"))[0]
		c := f.claim(f.ex(), "q", 1, 1, T0)[0]
		if ok, err := f.ex().ClaimDelete(f.ctx, id, c.Fence+1); err != nil || ok {
			t.Errorf("DeleteClaim with another fence = %v, %v; want false", ok, err)
		}
		f.wantState(driver.StateRunning, id)
		if ok, err := f.ex().ClaimDelete(f.ctx, id, c.Fence); err != nil || !ok {
			t.Errorf("DeleteClaim with its fence = %v, %v; want true", ok, err)
		}
		if ok, err := f.ex().ClaimDelete(f.ctx, id, c.Fence); err != nil || ok {
			t.Errorf("second DeleteClaim = %v, %v; want false: the claim is gone", ok, err)
		}
	}},
	test{"AClaimAgainHasANewFence", func(t *testing.T, f *fixture) {
		// A reaped job, claimed again: the old run's fence matches nothing.
		id := f.insert(T0, job("q"))[0]
		old := f.claim(f.ex(), "q", 1, 1, T0)[0]
		f.tx(func(ex driver.Executor) error {
			if _, err := ex.ClaimDelete(f.ctx, id, old.Fence); err != nil {
				return err
			}
			return ex.ExecutionInsertMany(f.ctx, driver.StateReady, []driver.Execution{{JobID: id, Queue: "q", At: T0}})
		})
		now := f.claim(f.ex(), "q", 1, 2, T0.Add(time.Minute))[0]
		if now.Fence == old.Fence {
			t.Fatalf("the second claim of job %d has the first one's fence %d", id, old.Fence)
		}
		matched, err := f.ex().ClaimCompleteMany(f.ctx, []*driver.Claim{old}, true, T0)
		f.must(err)
		if len(matched) != 0 {
			t.Errorf("CompleteClaims of the stale claim matched %v", matched)
		}
		if ok, err := f.ex().ClaimDelete(f.ctx, id, old.Fence); err != nil || ok {
			t.Errorf("DeleteClaim with the stale fence = %v, %v; want false", ok, err)
		}
		f.wantState(driver.StateRunning, id)
	}},
	test{"CompleteClaimsLeavesOutStaleFences", func(t *testing.T, f *fixture) {
		for _, keep := range []bool{true, false} {
			g := f
			if !keep {
				g = f.other()
			}
			g.insert(T0, jobs(3, "q")...)
			claims := g.claim(g.ex(), "q", 3, 1, T0)
			stale := *claims[1]
			stale.Fence++
			end := T0.Add(time.Minute)
			ended, err := g.ex().ClaimCompleteMany(g.ctx, []*driver.Claim{claims[0], &stale, claims[2]}, keep, end)
			g.must(err)
			matched := fencesOf(ended)
			want := []driver.Fenced{{JobID: claims[0].ID, Fence: claims[0].Fence}, {JobID: claims[2].ID, Fence: claims[2].Fence}}
			slices.SortFunc(matched, func(a, b driver.Fenced) int { return int(a.JobID - b.JobID) })
			slices.SortFunc(want, func(a, b driver.Fenced) int { return int(a.JobID - b.JobID) })
			if !slices.Equal(matched, want) {
				t.Errorf("keep %v: CompleteClaims matched %v, want %v", keep, matched, want)
			}
			g.wantState(driver.StateRunning, claims[1].ID)
			for _, c := range []*driver.Claim{claims[0], claims[2]} {
				info, ok, err := g.ex().JobGet(g.ctx, c.ID)
				g.must(err)
				switch {
				case keep && (!ok || info.State != driver.StateCompleted || info.Attempt != 1 || info.FinishedAt == nil || !info.FinishedAt.Equal(end)):
					t.Errorf("kept job %d: %v %+v; want completed at %v, attempt 1", c.ID, ok, info, end)
				case !keep && ok:
					t.Errorf("job %d still exists after CompleteClaims without keep", c.ID)
				}
			}
			again, err := g.ex().ClaimCompleteMany(g.ctx, claims, keep, end)
			g.must(err)
			if len(again) != 1 || again[0].JobID != claims[1].ID {
				t.Errorf("keep %v: second CompleteClaims matched %v, want only job %d's claim, never completed", keep, again, claims[1].ID)
			}
		}
	}},
	test{"ClaimsOfProcess", func(t *testing.T, f *fixture) {
		f.insert(T0, job("q"), job("q"), job("q"))
		mine := f.claim(f.ex(), "q", 2, 11, T0)
		f.claim(f.ex(), "q", 1, 12, T0)
		got, err := f.ex().ClaimListOfProcess(f.ctx, 11)
		f.must(err)
		slices.SortFunc(got, func(a, b driver.OwnClaim) int { return int(a.JobID - b.JobID) })
		var want []driver.OwnClaim
		for _, c := range mine {
			want = append(want, driver.OwnClaim{JobID: c.ID, Fence: c.Fence, ClaimedAt: T0})
		}
		slices.SortFunc(want, func(a, b driver.OwnClaim) int { return int(a.JobID - b.JobID) })
		if len(got) != len(want) {
			t.Fatalf("ClaimsOfProcess = %+v, want %+v", got, want)
		}
		for i := range got {
			if got[i].JobID != want[i].JobID || got[i].Fence != want[i].Fence || !got[i].ClaimedAt.Equal(T0) {
				t.Errorf("ClaimsOfProcess[%d] = %+v, want %+v", i, got[i], want[i])
			}
		}
	}},
)

var _ = add("transactions",
	// The engine opens bq's transactions: a driver whose methods may take
	// several statements refuses to run them outside one rather than
	// open its own.
	test{"SeveralStatementsNeedTheEnginesTransaction", func(t *testing.T, f *fixture) {
		if _, ok := f.d.(driver.OneStatementWriter); ok {
			t.Skipf("%s writes each method in one statement", f.d.Dialect())
		}
		f.insert(T0, job("q"))
		_, err := f.d.Exec().ReadyClaim(f.ctx, driver.ClaimParams{Queue: "q", Max: 1, ProcessID: 1, Now: T0})
		if !errors.Is(err, driver.ErrNeedsTx) {
			t.Errorf("ClaimReady outside a transaction = %v, want driver.ErrNeedsTx", err)
		}
		if got := f.engineClaim("q", 1, 1, T0); len(got) != 1 {
			t.Errorf("the engine's claim took %d, want 1", len(got))
		}
	}},
)
