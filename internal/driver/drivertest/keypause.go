package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Paused keys (KeyPause): no claim path takes a job of a paused key,
// whichever of its keys it is; resumed, they are claimed again.
var _ = add("keypause",
	test{"PausedKeyIsClaimedByNoPath", func(t *testing.T, f *fixture) {
		more := func(j *driver.NewJob) { j.More = []driver.Limit{{Key: "g/p", To: 9, Duration: time.Minute}} }
		pause := func(key string) bool {
			ok, err := f.ex().KeyPause(f.ctx, key, T0)
			f.must(err)
			return ok
		}
		if !pause("g/p") || pause("g/p") {
			t.Fatal("KeyPause twice: want true, then false (already paused)")
		}
		_, err := f.ex().KeyPause(f.ctx, "g/other", T0.Add(time.Second))
		f.must(err)
		got, err := f.ex().KeyListPaused(f.ctx)
		f.must(err)
		if len(got) != 2 || got[0].Key != "g/other" || got[1].Key != "g/p" {
			t.Fatalf("KeyListPaused = %+v, want g/other then g/p", got)
		}
		f.sameTime("g/p's paused_at", got[1].PausedAt, T0)

		// Three queues, one per claim path: uncapped (the one-statement
		// claim where there is one), capped (the rule's transaction) and
		// fair share (ReadyByKey, then the claim among its pick).
		_, err = f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "capped", Namespace: "ns", MaxActive: 10, UpdatedAt: T0})
		f.must(err)
		_, err = f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "fair", Namespace: "ns", FairShare: true, UpdatedAt: T0})
		f.must(err)
		for _, q := range []string{"free", "capped", "fair"} {
			ids := f.insert(T0, job(q, keyed("g/p", 9)), job(q, keyed("g/q", 9)), job(q, keyed("g/q", 9), more), job(q))
			paused, free := []int64{ids[0], ids[2]}, []int64{ids[1], ids[3]}
			got := claimIDs(f.engineClaim(q, 10, 1, T0))
			slices.Sort(got)
			if !slices.Equal(got, free) {
				t.Errorf("claim of queue %s with g/p paused took %v, want %v (not g/p's %d, nor %d whose further key is g/p)", q, got, free, paused[0], paused[1])
			}
			f.wantState(driver.StateReady, paused...)
			if q != "fair" {
				continue
			}
			// A free job left ready beside the paused ones, so a read that
			// lists nothing at all fails.
			other := f.insert(T0, job(q, keyed("g/r", 9)))[0]
			for _, perKey := range []bool{false, true} {
				var view driver.KeyView
				f.tx(func(ex driver.Executor) (err error) {
					view, err = ex.ReadyByKey(f.ctx, driver.KeyViewParams{Queue: q, Max: 5, PerKey: perKey})
					return err
				})
				listed := false
				for _, k := range view.Keys {
					listed = listed || slices.Contains(k.JobIDs, other)
					if slices.Contains(k.JobIDs, paused[0]) || slices.Contains(k.JobIDs, paused[1]) {
						t.Errorf("ReadyByKey (PerKey %v) with g/p paused lists its jobs: %+v", perKey, view.Keys)
					}
				}
				if !listed {
					t.Errorf("ReadyByKey (PerKey %v) with g/p paused: %+v, want g/r's job %d listed", perKey, view.Keys, other)
				}
			}
		}
		// The hand-off's pick leaves a paused key's job too.
		h := f.insert(T0, job("handoff", keyed("g/p", 9)))
		var handed []*driver.Claim
		f.tx(func(ex driver.Executor) (err error) {
			handed, err = ex.ReadyClaimHandOff(f.ctx, driver.HandOffParams{Queue: "handoff", IDs: h, Max: 5, ProcessID: 1, Now: T0})
			return err
		})
		if len(handed) != 0 {
			t.Errorf("hand-off of a paused key's job took %v, want none", claimIDs(handed))
		}
		// A claim among a pick that names it takes nothing of it either.
		var among []*driver.Claim
		f.tx(func(ex driver.Executor) (err error) {
			among, err = ex.ReadyClaim(f.ctx, driver.ClaimParams{Queue: "handoff", Max: 5, ProcessID: 1, Now: T0, Among: h})
			return err
		})
		if len(among) != 0 {
			t.Errorf("claim among a paused key's job took %v, want none", claimIDs(among))
		}

		ok, err := f.ex().KeyResume(f.ctx, "g/p")
		f.must(err)
		if again, err := f.ex().KeyResume(f.ctx, "g/p"); err != nil || !ok || again {
			t.Errorf("KeyResume twice = %v, then %v, %v; want true, then false", ok, again, err)
		}
		for _, q := range []string{"free", "capped", "fair", "handoff"} {
			if got := f.engineClaim(q, 10, 1, T0); len(got) == 0 {
				t.Errorf("claim of queue %s after the resume took nothing, want g/p's jobs", q)
			}
		}
	}},
)
