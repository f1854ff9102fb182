package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Policies: stored queue policies and key overrides, and the jobs that
// leave their limit to them.
var _ = add("policies",
	test{"InsertUpdateDeleteList", func(t *testing.T, f *fixture) {
		b := driver.Policy{Queue: "b", Namespace: "ns", MaxActive: 5, MaxActivePerKey: 2, MaxBlocked: 9,
			MaxWait: 1500 * time.Microsecond, AdaptiveMin: 2, UpdatedAt: T0}
		a := driver.Policy{Queue: "a", Namespace: "other", MaxActive: 1, UpdatedAt: T0}
		for _, p := range []driver.Policy{b, a} {
			if ok, err := f.ex().PolicyInsert(f.ctx, p); !ok || err != nil {
				t.Fatalf("InsertPolicy(%s) = %v, %v", p.Queue, ok, err)
			}
		}
		if ok, err := f.ex().PolicyInsert(f.ctx, driver.Policy{Queue: "b", Namespace: "x", MaxActive: 1, UpdatedAt: T0}); ok || err != nil {
			t.Errorf("InsertPolicy of a queue that has one = %v, %v; want false", ok, err)
		}
		list, err := f.ex().PolicyList(f.ctx)
		f.must(err)
		if len(list) != 2 || list[1].MaxWait != b.MaxWait || list[1].AdaptiveMin != 2 {
			t.Errorf("inserted policy b = %+v; want MaxWait %s (whole microseconds) and AdaptiveMin 2", list, b.MaxWait)
		}
		later := T0.Add(time.Hour)
		b2 := driver.Policy{Queue: "b", Namespace: "ns", MaxActive: 6, MaxActivePerKey: 3, MaxBlocked: 0,
			MaxWait: 2 * time.Hour, AdaptiveMin: 0, UpdatedAt: later}
		f.must(f.ex().PolicyUpdate(f.ctx, b2))
		list, err = f.ex().PolicyList(f.ctx)
		f.must(err)
		if len(list) != 2 || list[0].Queue != "a" || list[1].Queue != "b" {
			t.Fatalf("ListPolicies = %+v, want a then b", list)
		}
		got := list[1]
		if got.Namespace != "ns" || got.MaxActive != 6 || got.MaxActivePerKey != 3 || got.MaxBlocked != 0 ||
			got.MaxWait != 2*time.Hour || got.AdaptiveMin != 0 {
			t.Errorf("updated policy = %+v, want %+v", got, b2)
		}
		f.sameTime("CreatedAt", got.CreatedAt, T0)
		f.sameTime("UpdatedAt", got.UpdatedAt, later)
		f.must(f.ex().PolicyDelete(f.ctx, "a"))
		if list, err := f.ex().PolicyList(f.ctx); err != nil || len(list) != 1 || list[0].Queue != "b" {
			t.Errorf("ListPolicies after deleting a = %+v, %v", list, err)
		}
	}},
	test{"PolicyRateKeys", func(t *testing.T, f *fixture) {
		rate := func(key string, limit int) func(*driver.NewJob) {
			return func(j *driver.NewJob) {
				j.Rate = driver.RateSpec{Key: key, Limit: limit, Period: time.Second * time.Duration(limit)}
			}
		}
		f.insert(T0, job("q", rate("g/b", 0)), job("q", rate("g/a", 0)), job("q", rate("g/a", 0), blocked),
			job("q", rate("g/own", 3)), job("q"), job("other", rate("g/c", 0)), job("q", rate("g/done", 0)))
		for _, c := range f.claim(f.ex(), "q", 10, 1, T0) {
			if c.Rate.Key == "g/done" {
				_, err := f.ex().ClaimCompleteMany(f.ctx, []*driver.Claim{c}, true, T0)
				f.must(err)
			}
		}
		keys, err := f.ex().PolicyListRateKeys(f.ctx, "q")
		f.must(err)
		if want := []string{"g/a", "g/b"}; !slices.Equal(keys, want) {
			t.Errorf("PolicyRateKeys(q) = %v, want %v: unfinished jobs of q that leave their rate to the policy, each key once", keys, want)
		}
	}},
	test{"PolicyRateRoundTrip", func(t *testing.T, f *fixture) {
		p := driver.Policy{Queue: "r", Namespace: "ns", MaxActivePerKey: 2, MaxStartsPerKey: 7, StartsPeriod: 1500 * time.Millisecond,
			UpdatedAt: T0}
		if ok, err := f.ex().PolicyInsert(f.ctx, p); !ok || err != nil {
			t.Fatalf("InsertPolicy = %v, %v", ok, err)
		}
		check := func(when string, limit int, period time.Duration) {
			t.Helper()
			var locked []driver.Policy
			f.tx(func(ex driver.Executor) (err error) {
				locked, err = ex.PolicyLockMany(f.ctx, "ns", nil)
				return err
			})
			list, err := f.ex().PolicyList(f.ctx)
			f.must(err)
			for _, got := range append(list, locked...) {
				if got.MaxStartsPerKey != limit || got.StartsPeriod != period || got.MaxActivePerKey != 2 {
					t.Errorf("%s: policy %+v, want %d starts per %s and MaxActivePerKey 2", when, got, limit, period)
				}
			}
			if len(list) != 1 || len(locked) != 1 {
				t.Errorf("%s: listed %d, locked %d policies, want 1 each", when, len(list), len(locked))
			}
			spec, err := f.ex().PolicyGetRate(f.ctx, "r")
			f.must(err)
			if spec.Limit != limit || spec.Period != period {
				t.Errorf("%s: PolicyRate = %+v, want %d per %s", when, spec, limit, period)
			}
		}
		check("inserted", 7, 1500*time.Millisecond)
		p.MaxStartsPerKey, p.StartsPeriod, p.UpdatedAt = 10000, time.Hour, T0.Add(time.Minute)
		f.must(f.ex().PolicyUpdate(f.ctx, p))
		check("updated", 10000, time.Hour)
		p.MaxStartsPerKey, p.StartsPeriod = 0, 0
		f.must(f.ex().PolicyUpdate(f.ctx, p))
		check("rate removed", 0, 0)
		if spec, err := f.ex().PolicyGetRate(f.ctx, "no-such-queue"); err != nil || spec != (driver.RateSpec{}) {
			t.Errorf("PolicyRate of a queue with no policy = %+v, %v; want none", spec, err)
		}
	}},
	test{"LockPoliciesOfANamespaceAndQueues", func(t *testing.T, f *fixture) {
		for _, p := range []driver.Policy{{Queue: "d", Namespace: "ns"}, {Queue: "a", Namespace: "ns"},
			{Queue: "c", Namespace: "other"}, {Queue: "b", Namespace: "other"}, {Queue: "e", Namespace: "third"}} {
			p.MaxActive, p.UpdatedAt = 1, T0
			_, err := f.ex().PolicyInsert(f.ctx, p)
			f.must(err)
		}
		var queues []string
		f.tx(func(ex driver.Executor) error {
			list, err := ex.PolicyLockMany(f.ctx, "ns", []string{"c", "zz"})
			for _, p := range list {
				queues = append(queues, p.Queue)
			}
			return err
		})
		if want := []string{"a", "c", "d"}; !slices.Equal(queues, want) {
			t.Errorf("LockPolicies(ns, [c zz]) = %v, want %v: the namespace's and the named queues', by queue", queues, want)
		}
		if !f.rowLocks() {
			return
		}
		holder := f.begin()
		_, err := holder.PolicyLockMany(f.ctx, "ns", nil)
		f.must(err)
		waiting, wait := waits(func() error {
			return driver.InTx(f.ctx, f.d, func(ex driver.Executor) error {
				_, err := ex.PolicyLockMany(f.ctx, "other", []string{"a"})
				return err
			})
		})
		if !waiting {
			t.Errorf("LockPolicies of a policy another transaction locked returned at once")
		}
		f.must(holder.Commit(f.ctx))
		f.must(wait())
	}},
	test{"PolicyKeys", func(t *testing.T, f *fixture) {
		f.insert(T0, job("q", keyed("g/b", 0)), job("q", keyed("g/a", 0)), job("q", keyed("g/a", 0), blocked),
			job("q", keyed("g/own", 3)), job("q"), job("other", keyed("g/c", 0)), job("q", keyed("g/done", 0)))
		// g/done's job finishes: it no longer counts.
		for _, c := range f.claim(f.ex(), "q", 10, 1, T0) {
			if c.Limit.Key == "g/done" {
				_, err := f.ex().ClaimCompleteMany(f.ctx, []*driver.Claim{c}, true, T0)
				f.must(err)
			}
		}
		keys, err := f.ex().PolicyListKeys(f.ctx, "q")
		f.must(err)
		if want := []string{"g/a", "g/b"}; !slices.Equal(keys, want) {
			t.Errorf("PolicyKeys(q) = %v, want %v: unfinished jobs of q that leave their limit to the policy, each key once", keys, want)
		}
	}},
	test{"KeyLimits", func(t *testing.T, f *fixture) {
		f.semaphore("g/k", 1, 1, 0, T0)
		override := func() int {
			var o int
			f.tx(func(ex driver.Executor) error {
				s, _, err := ex.SemaphoreLock(f.ctx, "g/k", "")
				o = s.Override
				return err
			})
			return o
		}
		f.must(f.ex().KeyLimitSet(f.ctx, "g/k", 4, T0))
		first := override()
		f.must(f.ex().KeyLimitSet(f.ctx, "g/k", 2, T0.Add(time.Minute)))
		if second := override(); first != 4 || second != 2 {
			t.Errorf("overrides read %d then %d, want 4 then 2 (SetKeyLimit replaces)", first, second)
		}
		ok, err := f.ex().KeyLimitDelete(f.ctx, "g/k")
		f.must(err)
		again, err := f.ex().KeyLimitDelete(f.ctx, "g/k")
		f.must(err)
		if !ok || again || override() != 0 {
			t.Errorf("DeleteKeyLimit = %v then %v, override left %d; want true, false, none", ok, again, override())
		}
	}},
	test{"LatestJobLimit", func(t *testing.T, f *fixture) {
		if _, _, ok, err := f.ex().JobLimitGetLatest(f.ctx, "g/k"); ok || err != nil {
			t.Errorf("LatestJobLimit of a key without jobs = %v, %v; want false", ok, err)
		}
		newest := driver.Limit{Key: "g/k", To: 3, Duration: 2 * time.Minute, OnConflict: driver.Discard, MaxBlocked: 4}
		f.insert(T0, job("old", keyed("g/k", 1)), job("new", func(j *driver.NewJob) { j.Limit = newest }), job("q", keyed("g/other", 9)))
		l, q, ok, err := f.ex().JobLimitGetLatest(f.ctx, "g/k")
		f.must(err)
		if !ok || l != newest || q != "new" {
			t.Errorf("LatestJobLimit = %+v of %q (%v), want %+v of the newest job's queue", l, q, ok, newest)
		}
		// Once every job of the key has finished there is none.
		for _, c := range f.claim(f.ex(), "old", 1, 1, T0) {
			_, err := f.ex().ClaimCompleteMany(f.ctx, []*driver.Claim{c}, true, T0)
			f.must(err)
		}
		for _, c := range f.claim(f.ex(), "new", 1, 1, T0) {
			_, err := f.ex().ClaimCompleteMany(f.ctx, []*driver.Claim{c}, true, T0)
			f.must(err)
		}
		if _, _, ok, err := f.ex().JobLimitGetLatest(f.ctx, "g/k"); ok || err != nil {
			t.Errorf("LatestJobLimit once the key's jobs finished = %v, %v; want false", ok, err)
		}
	}},
)
