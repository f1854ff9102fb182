package drivertest

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Maintenance: the dispatcher's passes (scheduled jobs, expired and
// promotable semaphores, idle ones, retention) and the reaper's reads.
var _ = add("maintenance",
	test{"HasDueScheduled", func(t *testing.T, f *fixture) {
		due := T0.Add(time.Minute)
		f.insert(T0, job("q", dueAt(due)))
		for _, c := range []struct {
			at   time.Time
			want bool
		}{{T0, false}, {due.Add(-time.Millisecond), false}, {due, true}, {due.Add(time.Hour), true}} {
			if got, err := f.ex().ScheduledDueExists(f.ctx, c.at); got != c.want || err != nil {
				t.Errorf("HasDueScheduled(%v) with a job due at %v = %v, %v; want %v", c.at, due, got, err, c.want)
			}
		}
	}},
	test{"TakeDueScheduledTakesTheEarliestDue", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q", dueAt(T0.Add(3*time.Minute)), keyed("g/k", 2)), job("q", dueAt(T0.Add(time.Minute))),
			job("q", dueAt(T0.Add(2*time.Minute))), job("q", dueAt(T0.Add(time.Hour))))
		now := T0.Add(5 * time.Minute)
		var taken []int64
		for _, want := range [][]int64{{ids[1], ids[2]}, {ids[0]}, nil} {
			jobs, err := f.ex().ScheduledTakeDue(f.ctx, now, 2)
			f.must(err)
			var got []int64
			for _, j := range jobs {
				got = append(got, j.ID)
				if j.ID == ids[0] && (j.Limit.Key != "g/k" || j.Limit.To != 2 || j.Queue != "q") {
					t.Errorf("taken job %+v lost its limit or queue", j)
				}
			}
			if !slices.Equal(sorted(got), want) {
				t.Errorf("TakeDueScheduled(max 2) took %v, want %v: the earliest due first", sorted(got), want)
			}
			taken = append(taken, got...)
		}
		f.wantState("", taken...) // in no table: the engine admits them next
		f.wantState(driver.StateScheduled, ids[3])
	}},
	test{"PassLookSaysWhichStepsHaveWork", func(t *testing.T, f *fixture) {
		look := func(at time.Time, want driver.PassWork, what string) {
			t.Helper()
			got, err := f.ex().PassLook(f.ctx, at)
			f.must(err)
			procs, err := f.ex().ProcessList(f.ctx)
			f.must(err)
			for _, p := range procs {
				want.Beats = append(want.Beats, driver.ProcessBeat{ID: p.ID, LastHeartbeatAt: p.LastHeartbeatAt})
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("PassLook at %v with %s = %+v, want %+v", at, what, got, want)
			}
		}
		look(T0, driver.PassWork{}, "nothing stored")
		// The processes come back with the flags, as ProcessList reads
		// them: the reaper's look.
		f.process("a", T0.Add(-time.Minute), time.Second, time.Minute)
		f.process("b", T0, time.Second, time.Minute)
		look(T0, driver.PassWork{}, "two processes")
		due := T0.Add(time.Minute)
		f.insert(T0, job("q", dueAt(due)))
		f.semaphore("g/idle", 1, 1, 0, T0.Add(-time.Second)) // expired, nothing to reclaim
		f.semaphore("g/full", 0, 1, 2, T0.Add(time.Hour))    // blocked jobs, no free slot
		look(T0, driver.PassWork{}, "a job not due yet, an idle expired semaphore, a full one")
		look(due, driver.PassWork{ScheduledDue: true}, "the job due")
		f.semaphore("g/taken", 0, 1, 0, T0.Add(-time.Second)) // expired with its slot taken
		f.semaphore("g/free", 1, 2, 1, T0.Add(time.Hour))     // a free slot and a blocked job
		look(T0, driver.PassWork{SemaphoresExpired: true, SemaphoresPromotable: true}, "a taken expired semaphore and a promotable one")
		ids := f.insert(T0, job("d"), job("d"))
		claims := f.claim(f.ex(), "d", 1, 1, T0)
		_, err := f.ex().ClaimCompleteMany(f.ctx, claims, true, T0)
		f.must(err)
		f.tx(func(ex driver.Executor) error {
			return ex.DependencyInsertMany(f.ctx, []driver.Dependency{{JobID: ids[1], DependsOn: claims[0].ID}})
		})
		look(T0, driver.PassWork{SemaphoresExpired: true, SemaphoresPromotable: true, DependenciesEnded: true},
			"a completed job a waiting job depends on")
	}},
	test{"ExpiredSemaphoresPageInKeyOrder", func(t *testing.T, f *fixture) {
		past, future := T0.Add(-time.Second), T0.Add(time.Minute)
		f.semaphore("g/d", 0, 1, 0, past)
		f.semaphore("g/a", 0, 2, 0, past)
		f.semaphore("g/c", 0, 1, 0, future)
		f.semaphore("g/b", 1, 1, 2, past)
		f.semaphore("g/e", 0, 1, 0, T0) // expires at now: not yet expired
		var pages [][]string
		for after := ""; ; {
			keys, err := f.ex().SemaphoreListExpired(f.ctx, T0, after, 2)
			f.must(err)
			if len(keys) == 0 {
				break
			}
			pages = append(pages, keys)
			after = keys[len(keys)-1]
		}
		if want := [][]string{{"g/a", "g/b"}, {"g/d"}}; !slices.EqualFunc(pages, want, slices.Equal) {
			t.Errorf("ExpiredSemaphores pages = %v, want %v", pages, want)
		}
	}},
	test{"PromotableSemaphoresPageInKeyOrder", func(t *testing.T, f *fixture) {
		f.semaphore("g/d", 1, 2, 1, T0)
		f.semaphore("g/a", 1, 1, 3, T0)
		f.semaphore("g/b", 0, 1, 2, T0)  // no free slot
		f.semaphore("g/c", 2, 2, 0, T0)  // nothing blocked
		f.semaphore("g/e", -1, 1, 1, T0) // over its limit
		f.semaphore("g/f", 3, 4, 9, T0)
		first, err := f.ex().SemaphoreListPromotable(f.ctx, "", 2)
		f.must(err)
		rest, err := f.ex().SemaphoreListPromotable(f.ctx, "g/d", 2)
		f.must(err)
		if !slices.Equal(first, []string{"g/a", "g/d"}) || !slices.Equal(rest, []string{"g/f"}) {
			t.Errorf("PromotableSemaphores pages = %v, %v; want [g/a g/d], [g/f]", first, rest)
		}
	}},
	test{"EverySemaphorePagesInKeyOrder", func(t *testing.T, f *fixture) {
		f.semaphore("g/c", 2, 2, 0, T0)                 // idle
		f.semaphore("g/a", 0, 1, 3, T0)                 // full, a line
		f.semaphore("g/b", -1, 1, 0, T0)                // over its limit
		f.semaphore("g/d", 1, 1, 0, T0.Add(-time.Hour)) // expired
		var pages [][]string
		for after := ""; ; {
			keys, err := f.ex().SemaphoreList(f.ctx, after, 3)
			f.must(err)
			if len(keys) == 0 {
				break
			}
			pages = append(pages, keys)
			after = keys[len(keys)-1]
		}
		if want := [][]string{{"g/a", "g/b", "g/c"}, {"g/d"}}; !slices.EqualFunc(pages, want, slices.Equal) {
			t.Errorf("SemaphoreList pages = %v, want %v", pages, want)
		}
	}},
	test{"DeleteIdleSemaphores", func(t *testing.T, f *fixture) {
		past := T0.Add(-time.Second)
		f.semaphore("g/idle1", 2, 2, 0, past)
		f.semaphore("g/idle2", 1, 1, 0, past)
		f.semaphore("g/fresh", 1, 1, 0, T0.Add(time.Minute))
		f.semaphore("g/held", 0, 1, 0, past)
		f.semaphore("g/waiting", 1, 1, 1, past)
		f.insert(T0, job("q", keyed("g/waiting", 1), blocked))
		if n, err := f.ex().SemaphoreDeleteIdle(f.ctx, T0, 1); n != 1 || err != nil {
			t.Errorf("DeleteIdleSemaphores(max 1) = %d, %v", n, err)
		}
		if n, err := f.ex().SemaphoreDeleteIdle(f.ctx, T0, 10); n != 1 || err != nil {
			t.Errorf("second DeleteIdleSemaphores = %d, %v; want the other idle one", n, err)
		}
		for key, want := range map[string]bool{"g/idle1": false, "g/idle2": false, "g/fresh": true, "g/held": true, "g/waiting": true} {
			if _, ok, err := f.ex().SemaphoreGet(f.ctx, key); ok != want || err != nil {
				t.Errorf("semaphore %s exists: %v, %v; want %v", key, ok, err, want)
			}
		}
	}},
	test{"DeleteFinishedJobsOldestFirst", func(t *testing.T, f *fixture) {
		ids := f.insert(T0, job("q"), job("q"), job("q"), job("q"))
		for i, c := range f.claim(f.ex(), "q", 3, 1, T0) {
			if _, err := f.ex().ClaimCompleteMany(f.ctx, []*driver.Claim{c}, true, T0.Add(time.Duration(3-i)*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		// Finished at T0+3m (ids[0]), +2m (ids[1]), +1m (ids[2]); ids[3] ready.
		exists := func(id int64) bool {
			_, ok, err := f.ex().JobGet(f.ctx, id)
			f.must(err)
			return ok
		}
		before := T0.Add(150 * time.Second)
		for _, want := range []struct {
			max, n int
			gone   int64
		}{{1, 1, ids[2]}, {10, 1, ids[1]}, {10, 0, 0}} {
			n, err := f.ex().JobDeleteFinished(f.ctx, before, want.max)
			f.must(err)
			if n != want.n || (want.gone != 0 && exists(want.gone)) {
				t.Errorf("DeleteFinishedJobs(before %v, max %d) = %d; want %d, the oldest finished first", before, want.max, n, want.n)
			}
		}
		if !exists(ids[0]) || !exists(ids[3]) {
			t.Errorf("DeleteFinishedJobs removed a job finished later, or one not finished")
		}
	}},
	test{"LostClaimsOfGoneProcesses", func(t *testing.T, f *fixture) {
		live := f.process("live", T0, time.Second, time.Minute)
		gone := f.process("gone", T0, time.Second, time.Minute)
		f.insert(T0, job("q"), job("q"), job("q"), job("q"))
		f.claim(f.ex(), "q", 3, gone, T0)
		f.claim(f.ex(), "q", 1, live, T0)
		f.must(f.ex().ProcessDeregister(f.ctx, gone))
		lost, err := f.ex().ClaimListReapable(f.ctx, T0, deadAfter, 2)
		f.must(err)
		all, err := f.ex().ClaimListReapable(f.ctx, T0, deadAfter, 10)
		f.must(err)
		if len(lost) != 2 || len(all) != 3 {
			t.Fatalf("LostClaims of a gone process's 3 claims: %d with max 2, %d with max 10", len(lost), len(all))
		}
		for _, c := range all {
			if !c.ClaimedAt.Equal(T0) || c.Fence == 0 || c.Queue != "q" {
				t.Errorf("lost claim %+v: want its fence, queue and ClaimedAt", c)
			}
		}
	}},
	test{"LostClaimsOnEvidence", func(t *testing.T, f *fixture) {
		for _, c := range silences {
			t.Run(c.name, func(t *testing.T) {
				g := newFixture(t, f.open)
				silent, witness := g.witnessed(c, time.Second)
				g.insert(T0, job("q"), job("q"))
				mine := g.claim(g.ex(), "q", 1, silent, T0)[0]
				g.claim(g.ex(), "q", 1, witness, T0)
				lost, err := g.ex().ClaimListReapable(g.ctx, T0.Add(c.now), deadAfter, 10)
				g.must(err)
				if got := claimIDs(lost); c.dead != slices.Equal(got, []int64{mine.ID}) || (!c.dead && len(got) > 0) {
					t.Errorf("LostClaims = jobs %v; want the silent process's job %d lost: %v", got, mine.ID, c.dead)
				}
			})
		}
	}},
	test{"LostClaimsSkipsRowsAnotherTransactionHolds", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		f.insert(T0, job("q"), job("q"))
		f.claim(f.ex(), "q", 2, 404, T0) // a process never registered: gone
		reaper := f.begin()
		first, err := reaper.ClaimListReapable(f.ctx, T0, deadAfter, 1)
		f.must(err)
		if len(first) != 1 {
			t.Fatalf("LostClaims(max 1) = %d claims", len(first))
		}
		other, err := f.ex().ClaimListReapable(f.quick(), T0, deadAfter, 10)
		if err != nil {
			t.Fatalf("LostClaims beside a reaper's open transaction: %v (it must skip the rows that one holds)", err)
		}
		if len(other) != 1 || other[0].ID == first[0].ID {
			t.Errorf("LostClaims beside a reaper holding job %d = jobs %v; want the other one only", first[0].ID, claimIDs(other))
		}
	}},
	test{"LostClaimsOfKeyWaitsTheKeysSilence", func(t *testing.T, f *fixture) {
		// The silence of a key: the longest of the silence asked, the
		// claimed job's Duration and three heartbeat intervals.
		for _, c := range []struct {
			name          string
			hb, duration  time.Duration
			witness, lost time.Duration // the witness's last beat and the judgement, after T0
			want          bool
		}{
			{"WithinTheJobsDuration", time.Second, 40 * time.Second, 35 * time.Second, 35 * time.Second, false},
			{"BeyondTheJobsDuration", time.Second, 40 * time.Second, 45 * time.Second, 45 * time.Second, true},
			{"WithinThreeHeartbeats", 20 * time.Second, 5 * time.Second, 50 * time.Second, 50 * time.Second, false},
			{"BeyondThreeHeartbeats", 20 * time.Second, 5 * time.Second, 65 * time.Second, 65 * time.Second, true},
			{"BeyondTheSilenceAsked", time.Second, time.Second, 12 * time.Second, 12 * time.Second, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				g := newFixture(t, f.open)
				silent, witness := g.witnessed(silence{own: time.Hour, last: c.witness}, c.hb)
				k := func(j *driver.NewJob) { j.Limit = driver.Limit{Key: "g/k", To: 2, Duration: c.duration} }
				g.insert(T0, job("q", k), job("q", k), job("other", keyed("g/other", 1)))
				mine := g.claim(g.ex(), "q", 1, silent, T0)[0]
				g.claim(g.ex(), "q", 1, witness, T0)
				g.claim(g.ex(), "other", 1, silent, T0)
				lost, err := g.ex().ClaimListReapableOfKey(g.ctx, "g/k", T0.Add(c.lost), 10*time.Second)
				g.must(err)
				if got := claimIDs(lost); c.want != slices.Equal(got, []int64{mine.ID}) || (!c.want && len(got) > 0) {
					t.Errorf("LostClaimsOfKey(g/k) = jobs %v; want the silent process's job %d of g/k lost: %v", got, mine.ID, c.want)
				}
			})
		}
	}},
)
