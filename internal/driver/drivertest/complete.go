package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// bigBatch crosses the 1,000 items a MySQL statement's list takes, so a
// batch of completions runs in more than one chunk.
const bigBatch = 2500

// Completions in batches: a batch ends exactly the claims whose fence
// still names them, however large, and a stale fence changes nothing,
// even one that names another job's live claim.
var _ = add("complete",
	test{"CompleteClaimsMixedFencesAcrossChunks", func(t *testing.T, f *fixture) {
		for _, keep := range []bool{true, false} {
			g := f
			if !keep {
				g = f.other()
			}
			g.insert(T0, jobs(bigBatch, "q")...)
			claims := g.claim(g.ex(), "q", bigBatch, 1, T0)
			if len(claims) != bigBatch {
				t.Fatalf("claimed %d of %d jobs", len(claims), bigBatch)
			}
			slices.SortFunc(claims, func(a, b *driver.Claim) int { return int(a.Fence - b.Fence) })
			// Every 10th claim is left out of the batch; in its place the
			// batch carries a stale claim of the job before it, with the
			// left-out claim's fence: a fence that still exists, naming
			// another job. Every 7th claim comes twice. The last claim's
			// job also comes with a fence no claim has.
			var batch []*driver.Claim
			live := map[driver.Fenced]bool{}
			untouched := map[int64]bool{}
			for i, c := range claims {
				switch {
				case i%10 == 9:
					stale := *claims[i-1]
					stale.Fence = c.Fence
					batch = append(batch, &stale)
					untouched[c.ID] = true
					continue
				case i%7 == 0:
					batch = append(batch, c)
				}
				batch = append(batch, c)
				live[driver.Fenced{JobID: c.ID, Fence: c.Fence}] = true
			}
			gone := *claims[len(claims)-1]
			gone.Fence = claims[len(claims)-1].Fence + bigBatch
			batch = append(batch, &gone)
			// Shuffled by a fixed rule, so chunks mix fences from all over.
			slices.SortFunc(batch, func(a, b *driver.Claim) int { return int(a.ID*7919%997 - b.ID*7919%997) })

			end := T0.Add(time.Minute)
			matched, err := g.ex().ClaimCompleteMany(g.ctx, batch, keep, end)
			g.must(err)
			seen := map[driver.Fenced]bool{}
			for _, m := range fencesOf(matched) {
				if !live[m] || seen[m] {
					t.Errorf("keep %v: CompleteClaims matched %+v: stale, or twice", keep, m)
				}
				seen[m] = true
			}
			if len(seen) != len(live) {
				t.Errorf("keep %v: CompleteClaims matched %d claims, want the %d live ones", keep, len(seen), len(live))
			}
			for _, c := range claims {
				info, ok, err := g.ex().JobGet(g.ctx, c.ID)
				g.must(err)
				switch {
				case untouched[c.ID]:
					if !ok || info.State != driver.StateRunning {
						t.Fatalf("keep %v: job %d, whose fence only a stale claim carried, is %+v; want still running", keep, c.ID, info)
					}
				case keep && (!ok || info.State != driver.StateCompleted || info.Attempt != 1 || info.FinishedAt == nil || !info.FinishedAt.Equal(end)):
					t.Fatalf("keep %v: job %d: %v %+v; want completed at %v, attempt 1", keep, c.ID, ok, info, end)
				case !keep && ok:
					t.Fatalf("keep %v: job %d still exists after CompleteClaims without keep", keep, c.ID)
				}
			}
			own, err := g.ex().ClaimListOfProcess(g.ctx, 1)
			g.must(err)
			if len(own) != len(untouched) {
				t.Errorf("keep %v: %d claims left, want the %d left out of the batch", keep, len(own), len(untouched))
			}
			for _, o := range own {
				if !untouched[o.JobID] {
					t.Errorf("keep %v: claim %+v left, though the batch ended it", keep, o)
				}
			}
		}
	}},
	test{"CompleteClaimsOfNoLiveClaimChangesNothing", func(t *testing.T, f *fixture) {
		f.insert(T0, jobs(2, "q")...)
		claims := f.claim(f.ex(), "q", 2, 1, T0)
		a, b := *claims[0], *claims[1]
		a.Fence, b.Fence = claims[1].Fence, claims[0].Fence // each job with the other's fence
		matched, err := f.ex().ClaimCompleteMany(f.ctx, []*driver.Claim{&a, &b}, true, T0)
		f.must(err)
		if len(matched) != 0 {
			t.Errorf("CompleteClaims of swapped fences matched %v", matched)
		}
		f.wantState(driver.StateRunning, claims[0].ID, claims[1].ID)
		if matched, err := f.ex().ClaimCompleteMany(f.ctx, nil, true, T0); err != nil || len(matched) != 0 {
			t.Errorf("CompleteClaims of no claim = %v, %v", matched, err)
		}
	}},
)

// fencesOf is the claims of ended.
func fencesOf(ended []driver.Ended) []driver.Fenced {
	out := make([]driver.Fenced, len(ended))
	for i, e := range ended {
		out[i] = e.Fenced
	}
	return out
}
