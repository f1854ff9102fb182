package drivertest

import (
	"fmt"
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
		a := f.insert(T0, job("f", keyed("g/a", 9)), job("f", keyed("g/a", 9), prio(5)), job("f", keyed("g/a", 9), slots(2)), job("f", keyed("g/a", 9)))
		// The queue turns fair with jobs ready in it, and more come after.
		fair := driver.Policy{Queue: "f", Namespace: "ns", FairShare: true, UpdatedAt: T0}
		if _, err := f.ex().PolicyInsert(f.ctx, fair); err != nil {
			t.Fatal(err)
		}
		b := f.insert(T0, job("f", keyed("g/b", 9)))
		plain := f.insert(T0, job("f"), job("f"), job("f"))
		d := f.insert(T0, job("f", keyed("g/d", 9), slots(3))) // running, it counts 3
		f.insert(T0, job("other", keyed("g/a", 9)), job("f", keyed("g/c", 9), blocked))
		f.must(f.ex().KeyWeightSet(f.ctx, "g/b", 3, T0))
		// a's first job by priority (a[1]) runs, one plain job, and d's
		// only job, of 3 slots: d has work (a share), nothing ready, and
		// uses 3 of the queue's slots.
		f.tx(func(ex driver.Executor) error {
			_, err := ex.ReadyClaim(f.ctx, driver.ClaimParams{Queue: "f", Max: 5, ProcessID: 1, Now: T0, Among: []int64{a[1], plain[2], d[0]}})
			return err
		})
		view := func(rows int) (v driver.KeyView) {
			f.tx(func(ex driver.Executor) (err error) {
				v, err = ex.ReadyByKey(f.ctx, driver.KeyViewParams{Queue: "f", Max: 2, Rows: rows})
				return err
			})
			return v
		}
		same := func(x, y driver.KeyReady) bool {
			return x.Key == y.Key && x.Weight == y.Weight && x.Running == y.Running && x.Ready == y.Ready && slices.Equal(x.JobIDs, y.JobIDs) &&
				slices.Equal(x.Slots, y.Slots) && x.Head == y.Head
		}
		// The ready line in claim order: a[0], a[2], a[3], b, plain[0], plain[1].
		got := view(0)
		want := []driver.KeyReady{
			{Key: "", Running: 1, Ready: 2, JobIDs: plain[:2], Slots: []int{1, 1}, Head: 4},
			{Key: "g/a", Running: 1, Ready: 3, JobIDs: []int64{a[0], a[2]}, Slots: []int{1, 2}, Head: 0},
			{Key: "g/b", Weight: 3, Ready: 1, JobIDs: b, Slots: []int{1}, Head: 3},
			{Key: "g/d", Running: 3, Head: -1},
		}
		if !slices.EqualFunc(got.Keys, want, same) || !got.Whole || got.MaxWeight != 3 {
			t.Fatalf("ReadyByKey = %+v\nwant %+v, whole, max weight 3", got, want)
		}
		// The head alone: its first 4 jobs; the keys running count still.
		got = view(4)
		want = []driver.KeyReady{
			{Key: "", Running: 1, Head: -1},
			{Key: "g/a", Running: 1, Ready: 3, JobIDs: []int64{a[0], a[2]}, Slots: []int{1, 2}, Head: 0},
			{Key: "g/b", Weight: 3, Ready: 1, JobIDs: b, Slots: []int{1}, Head: 3},
			{Key: "g/d", Running: 3, Head: -1},
		}
		if !slices.EqualFunc(got.Keys, want, same) || got.Whole || got.MaxWeight != 3 {
			t.Fatalf("ReadyByKey of the first 4 = %+v\nwant %+v, not whole, max weight 3", got, want)
		}
		// Each key's first 2, wherever they stand (PerKey): g/a's third
		// is not read.
		f.tx(func(ex driver.Executor) (err error) {
			got, err = ex.ReadyByKey(f.ctx, driver.KeyViewParams{Queue: "f", Max: 2, PerKey: true})
			return err
		})
		want = []driver.KeyReady{
			{Key: "", Running: 1, Ready: 2, JobIDs: plain[:2], Slots: []int{1, 1}},
			{Key: "g/a", Running: 1, Ready: 2, JobIDs: []int64{a[0], a[2]}, Slots: []int{1, 2}},
			{Key: "g/b", Weight: 3, Ready: 1, JobIDs: b, Slots: []int{1}},
			{Key: "g/d", Running: 3, Head: -1},
		}
		sameButHead := func(x, y driver.KeyReady) bool {
			y.Head = x.Head
			return same(x, y) && (x.Head < 0) == (len(x.JobIDs) == 0)
		}
		if !slices.EqualFunc(got.Keys, want, sameButHead) || !got.Whole || got.MaxWeight != 3 {
			t.Fatalf("ReadyByKey of each key's first 2 = %+v\nwant %+v, whole, max weight 3", got, want)
		}
		// 6 rows read of 6 cannot tell the line ended; 7 can.
		if v := view(6); v.Whole || len(v.Keys) != 4 {
			t.Errorf("ReadyByKey of the first 6 = %+v, want the 4 keys, not whole", v)
		}
		if v := view(7); !v.Whole {
			t.Errorf("ReadyByKey of the first 7 = %+v, want whole", v)
		}
		// Fair share off, a job ready meanwhile, and on again: the same
		// read, and the new job's key read with the others'.
		fair.FairShare = false
		f.must(f.ex().PolicyUpdate(f.ctx, fair))
		e := f.insert(T0, job("f", keyed("g/e", 9)))
		fair.FairShare = true
		f.must(f.ex().PolicyUpdate(f.ctx, fair))
		f.tx(func(ex driver.Executor) (err error) {
			got, err = ex.ReadyByKey(f.ctx, driver.KeyViewParams{Queue: "f", Max: 2, PerKey: true})
			return err
		})
		want = append(want, driver.KeyReady{Key: "g/e", Ready: 1, JobIDs: e, Slots: []int{1}})
		if !slices.EqualFunc(got.Keys, want, sameButHead) || !got.Whole {
			t.Fatalf("ReadyByKey of each key's first 2, fair share turned off and on = %+v\nwant %+v, whole", got, want)
		}
	}},
	test{"FairQueuesPromotedJobsAreReadByKey", func(t *testing.T, f *fixture) {
		_, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "f", Namespace: "ns", FairShare: true, UpdatedAt: T0})
		f.must(err)
		ids := f.insert(T0, job("f", keyed("g/a", 1), blocked), job("f", keyed("g/b", 1), blocked), job("f", keyed("g/b", 1), blocked),
			job("f", keyed("g/c", 1), blocked))
		f.semaphore("g/a", 0, 1, 1, T0.Add(time.Hour))
		f.semaphore("g/b", 0, 1, 2, T0.Add(time.Hour))
		f.semaphore("g/c", 0, 1, 1, T0.Add(time.Hour))
		// g/a's and g/b's first jobs made ready set-wise, g/c's key by
		// key: the two ways a release promotes.
		f.tx(func(ex driver.Executor) error {
			_, err := ex.SemaphoreReleaseMany(f.ctx, []string{"g/a", "g/b"}, []int{1, 1}, T0)
			return err
		})
		f.tx(func(ex driver.Executor) error {
			_, err := releaseEach(f, ex, []string{"g/c"}, []int{1}, T0)
			return err
		})
		f.wantState(driver.StateReady, ids[0], ids[1], ids[3])
		var got driver.KeyView
		f.tx(func(ex driver.Executor) (err error) {
			got, err = ex.ReadyByKey(f.ctx, driver.KeyViewParams{Queue: "f", Max: 2, PerKey: true})
			return err
		})
		var read []string
		for _, k := range got.Keys {
			read = append(read, fmt.Sprint(k.Key, k.JobIDs))
		}
		if want := []string{fmt.Sprint("g/a", ids[:1]), fmt.Sprint("g/b", ids[1:2]), fmt.Sprint("g/c", ids[3:])}; !slices.Equal(read, want) {
			t.Errorf("ReadyByKey of each key's first 2 after the releases read %v, want %v", read, want)
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
	test{"FairClaimReadsTheHeadThenTheLine", func(t *testing.T, f *fixture) {
		_, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "f", Namespace: "ns", FairShare: true, UpdatedAt: T0})
		f.must(err)
		// A line longer than a claim of 2 reads first (driver.claimFair):
		// 40 keys of one job each; the head holds 2 idle keys, and the
		// claim takes the first job of each of the first two.
		var many []*driver.NewJob
		for i := range 40 {
			many = append(many, job("f", keyed(fmt.Sprintf("g/k%02d", i), 9)))
		}
		ids := f.insert(T0, many...)
		if got := claimIDs(f.engineClaim("f", 2, 1, T0)); !slices.Equal(got, ids[:2]) {
			t.Fatalf("fair claim of 2 from 40 idle keys took %v, want the line's first two %v", got, ids[:2])
		}
		// a's backlog of 40 then b's and c's jobs: the head is all a's, so
		// the claim reads the whole line; a, b and c are equally far below
		// their share, and the claim takes the first jobs of two of them
		// (drawn), never two of a's.
		a := f.insert(T0, jobs(40, "q", keyed("g/a", 99))...)
		bc := f.insert(T0, job("q", keyed("g/b", 9)), job("q", keyed("g/c", 9)))
		_, err = f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "q", Namespace: "ns", FairShare: true, UpdatedAt: T0})
		f.must(err)
		got := claimIDs(f.engineClaim("q", 2, 1, T0))
		firsts := []int64{a[0], bc[0], bc[1]}
		if len(got) != 2 || !slices.Contains(firsts, got[0]) || !slices.Contains(firsts, got[1]) {
			t.Fatalf("fair claim of 2 behind a backlog took %v, want two of a's, b's and c's first jobs %v", got, firsts)
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
