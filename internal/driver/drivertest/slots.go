package drivertest

import (
	"maps"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// slots makes the job take n slots of each of its keys (NewJob.Slots).
func slots(n int) func(*driver.NewJob) { return func(j *driver.NewJob) { j.Slots = n } }

// Jobs that take several slots of their keys: Slots is stored with the
// job, read back wherever the job is (a claim, a line's head), and a
// key's holders count each job's slots.
var _ = add("slots",
	test{"SlotsStoredAndReadBack", func(t *testing.T, f *fixture) {
		ids := f.insert(T0,
			job("q", keyed("g/s", 5), slots(3)),
			job("q", keyed("g/s", 5)),
			job("q", keyed("g/s", 5), slots(2), blocked),
			job("q", keyed("g/s", 5), also(5, "g/t"), slots(4), blocked, inLine("g/t")),
		)
		for i, want := range []int{3, 1, 2, 4} {
			if got := f.get(ids[i]).Slots; got != want {
				t.Errorf("GetJob(job %d).Slots = %d, want %d", i, got, want)
			}
		}
		claims := f.claim(f.ex(), "q", 2, 1, T0)
		if len(claims) != 2 || claims[0].ID != ids[0] || claims[0].Slots != 3 || claims[1].Slots != 1 {
			t.Errorf("claims = %v, slots %+v; want jobs %v taking 3 and 1 slots", claimIDs(claims), claims, ids[:2])
		}
		if heads := f.heads("g/s", 5); len(heads) != 1 || heads[0].Slots != 2 {
			t.Errorf("LineHeads(g/s) = %+v, want job %d of 2 slots", heads, ids[2])
		}
		var many [][]driver.LineHead
		f.tx(func(ex driver.Executor) (err error) {
			many, err = f.batcher(ex).LineListHeadsMany(f.ctx, []string{"g/s", "g/t"}, []int{5, 5})
			return err
		})
		if len(many) != 2 || len(many[0]) != 1 || many[0][0].Slots != 2 || len(many[1]) != 1 || many[1][0].Slots != 4 {
			t.Errorf("LineHeadsMany(g/s, g/t) = %+v, want a head of 2 slots, then one of 4", many)
		}
	}},
	test{"CountHoldersSumsSlots", func(t *testing.T, f *fixture) {
		f.insert(T0,
			job("q", keyed("g/s", 9), slots(3)),                                        // ready: 3
			job("c", keyed("g/s", 9), slots(2)),                                        // claimed below: 2
			job("q", keyed("g/s", 9), slots(2), blocked),                               // in line: none, head by head
			job("q", keyed("g/s", 9), blocked),                                         // in line: none
			job("q", keyed("g/s", 9), slots(2), blocked, inLine(driver.RateLine("r"))), // in a rate line: 2
			job("q", keyed("g/t", 9), also(9, "g/s"), slots(2)),                        // ready, multi-key: 2 of each
			job("q", keyed("g/s", 9), slots(3), dueAt(T0.Add(time.Hour))),              // scheduled: none
		)
		if c := f.claim(f.ex(), "c", 1, 1, T0); len(c) != 1 {
			t.Fatalf("claimed %v, want one job", claimIDs(c))
		}
		for key, want := range map[string]driver.HolderCount{
			"g/s":                {Holders: 9, Blocked: 2, Multi: 1},
			"g/t":                {Holders: 2},
			driver.RateLine("r"): {Blocked: 1, Multi: 1},
		} {
			if got := f.count(key); got != want {
				t.Errorf("CountHolders(%s) = %+v, want %+v (a job counts its slots; Multi, its blocked jobs of several slots or keys)", key, got, want)
			}
		}
	}}, test{"PromotedJobsKeepTheirSlots", func(t *testing.T, f *fixture) {
		// A fair queue, so every driver's ready rows carry what its read
		// of the line needs.
		_, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "f", Namespace: "ns", FairShare: true, UpdatedAt: T0})
		f.must(err)
		ids := f.insert(T0,
			job("f", keyed("g/s", 5), slots(2), blocked),
			job("f", keyed("g/s", 5), blocked),
			job("f", keyed("g/m", 5), also(5, "g/s"), slots(3), blocked, inLine("g/s")),
			job("f", keyed("g/u", 5), slots(4), blocked),
		)
		f.tx(func(ex driver.Executor) error {
			_, err := ex.LinePromote(f.ctx, "g/s", 3, T0)
			return err
		})
		f.tx(func(ex driver.Executor) (err error) {
			if b, ok := ex.(driver.MultiBatcher); ok {
				_, err = b.LinePromoteFirst(f.ctx, []string{"g/u"}, []int{1}, T0)
			} else {
				_, err = ex.LinePromote(f.ctx, "g/u", 1, T0)
			}
			return err
		})
		f.wantState(driver.StateReady, ids...)
		want := map[int64]int{ids[0]: 2, ids[1]: 1, ids[2]: 3, ids[3]: 4}
		for _, perKey := range []bool{false, true} {
			var view driver.KeyView
			f.tx(func(ex driver.Executor) (err error) {
				view, err = ex.ReadyByKey(f.ctx, driver.KeyViewParams{Queue: "f", Max: 5, PerKey: perKey})
				return err
			})
			got := map[int64]int{}
			for _, k := range view.Keys {
				for i, id := range k.JobIDs {
					got[id] = k.Slots[i]
				}
			}
			if !maps.Equal(got, want) {
				t.Errorf("ReadyByKey (PerKey %v) of the promoted jobs: slots %v, want %v", perKey, got, want)
			}
		}
	}},
)
