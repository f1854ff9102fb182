package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Fair share: a fair-share queue's view by key (ReadyByKey), the claim of
// the jobs its pick names (ReadyClaim with Among), the gate that sends its
// claims through the rule's transaction, and the keys' weights.
var _ = add("fair",
	test{"ReadyByKeyGroupsTheQueuesReadyJobs", func(t *testing.T, f *fixture) {
		a := f.insert(T0, job("f", keyed("g/a", 9)), job("f", keyed("g/a", 9), prio(5)), job("f", keyed("g/a", 9)), job("f", keyed("g/a", 9)))
		b := f.insert(T0, job("f", keyed("g/b", 9)))
		plain := f.insert(T0, job("f"), job("f"), job("f"))
		d := f.insert(T0, job("f", keyed("g/d", 9)))
		f.insert(T0, job("other", keyed("g/a", 9)), job("f", keyed("g/c", 9), blocked))
		f.must(f.ex().KeyWeightSet(f.ctx, "g/b", 3, T0))
		// a's first job by priority (a[1]) runs, one plain job, and d's
		// only job: d has work (a share) and nothing ready.
		f.tx(func(ex driver.Executor) error {
			_, err := ex.ReadyClaim(f.ctx, driver.ClaimParams{Queue: "f", Max: 5, ProcessID: 1, Now: T0, Among: []int64{a[1], plain[2], d[0]}})
			return err
		})
		var got []driver.KeyReady
		f.tx(func(ex driver.Executor) (err error) {
			got, err = ex.ReadyByKey(f.ctx, "f", 2)
			return err
		})
		want := []driver.KeyReady{
			{Key: "", Running: 1, Ready: 2, JobIDs: plain[:2]},
			{Key: "g/a", Running: 1, Ready: 3, JobIDs: []int64{a[0], a[2]}},
			{Key: "g/b", Weight: 3, Ready: 1, JobIDs: b},
			{Key: "g/d", Running: 1},
		}
		if !slices.EqualFunc(got, want, func(x, y driver.KeyReady) bool {
			return x.Key == y.Key && x.Weight == y.Weight && x.Running == y.Running && x.Ready == y.Ready && slices.Equal(x.JobIDs, y.JobIDs)
		}) {
			t.Fatalf("ReadyByKey = %+v\nwant %+v", got, want)
		}
	}},
	test{"ReadyClaimAmongTakesOnlyThoseReadyInTheQueue", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("f"), job("f", prio(3)), job("f"), job("other"))
		var got []*driver.Claim
		f.tx(func(ex driver.Executor) (err error) {
			got, err = ex.ReadyClaim(f.ctx, driver.ClaimParams{Queue: "f", Max: 5, ProcessID: 1, Now: T0, Among: []int64{ids[0], ids[1], ids[3]}})
			return err
		})
		if want := []int64{ids[1], ids[0]}; !slices.Equal(claimIDs(got), want) {
			t.Fatalf("claim among took %v, want %v (priority first; not another queue's)", claimIDs(got), want)
		}
		f.wantState(driver.StateReady, ids[2], ids[3])
		f.tx(func(ex driver.Executor) (err error) {
			got, err = ex.ReadyClaim(f.ctx, driver.ClaimParams{Queue: "f", Max: 5, ProcessID: 1, Now: T0, Among: []int64{}})
			return err
		})
		if len(got) != 0 {
			t.Errorf("claim among no jobs took %v", claimIDs(got))
		}
	}},
	test{"FairQueueIsClaimedByKey", func(t *testing.T, f *fixture) {
		_, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "f", Namespace: "ns", FairShare: true, KeyWeight: 2, UpdatedAt: T0})
		f.must(err)
		want := driver.Gate{Fair: true, Weight: 2}
		if got, err := f.ex().QueueGateGet(f.ctx, "f"); err != nil || got != want {
			t.Errorf("QueueGate(f) = %+v, %v; want %+v", got, err, want)
		}
		// a's backlog first, then b's two jobs: a plain claim would take
		// a's; the fair one takes one of each.
		a := f.insert(T0, jobs(6, "f", keyed("g/a", 9))...)
		b := f.insert(T0, jobs(2, "f", keyed("g/b", 9))...)
		got := claimIDs(f.engineClaim("f", 2, 1, T0))
		if !slices.Contains(got, a[0]) || !slices.Contains(got, b[0]) {
			t.Fatalf("fair claim of 2 took %v, want a's first (%d) and b's first (%d)", got, a[0], b[0])
		}
		// a hand-off never takes from a fair-share queue: its claims
		// follow the shares.
		var handed []*driver.Claim
		f.tx(func(ex driver.Executor) (err error) {
			handed, err = ex.ReadyClaimHandOff(f.ctx, driver.HandOffParams{Queue: "f", IDs: a, Max: 5, ProcessID: 1, Now: T0})
			return err
		})
		if len(handed) != 0 {
			t.Errorf("hand-off from a fair-share queue took %v, want none", claimIDs(handed))
		}
	}},
	test{"KeyWeightsRoundTrip", func(t *testing.T, f *fixture) {
		long := "g/" + string(slices.Repeat([]byte("k"), 900))
		f.must(f.ex().KeyWeightSet(f.ctx, "g/b", 3, T0))
		f.must(f.ex().KeyWeightSet(f.ctx, long, 2, T0))
		f.must(f.ex().KeyWeightSet(f.ctx, "g/b", 5, T0.Add(time.Minute)))
		got, err := f.ex().KeyWeightList(f.ctx)
		f.must(err)
		if len(got) != 2 || got[0].Key != "g/b" || got[0].Weight != 5 || got[1].Key != long || got[1].Weight != 2 {
			t.Fatalf("KeyWeightList = %+v, want g/b 5 then the long key 2", got)
		}
		f.sameTime("g/b's updated_at", got[0].UpdatedAt, T0.Add(time.Minute))
		if ok, err := f.ex().KeyWeightDelete(f.ctx, "g/b"); err != nil || !ok {
			t.Errorf("KeyWeightDelete(g/b) = %v, %v; want true", ok, err)
		}
		if ok, err := f.ex().KeyWeightDelete(f.ctx, "g/b"); err != nil || ok {
			t.Errorf("second KeyWeightDelete(g/b) = %v, %v; want false", ok, err)
		}
	}},
)
