package drivertest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// releaseFixture is testdata/drivertest/release-many.json.
type releaseFixture struct {
	Keys []struct {
		Key, Why              string
		Value, Limit, Release int
		ExpiresIn             string
		Missing               bool
		// Counted is the semaphore's blocked count when it is not the
		// jobs listed (a count that drifted from the rows).
		Counted *int
		Blocked []struct {
			Name, Queue string
			Priority    int
		}
	}
}

// Set-wise release is key-by-key release done at once: the same fixture,
// released both ways on two fresh databases, ends the same.
var _ = add("semaphores",
	test{"ReleaseManyEqualsPerKeyRelease", func(t *testing.T, f *fixture) {
		var fx releaseFixture
		b, err := os.ReadFile(testdata(t, "drivertest", "release-many.json"))
		f.must(err)
		f.must(json.Unmarshal(b, &fx))
		var keys []string
		var counts []int
		for _, k := range fx.Keys {
			keys, counts = append(keys, k.Key), append(counts, k.Release)
		}
		perKey, setWise := f, f.other()
		now := T0
		var want, got []driver.Promotion
		perKeyIDs, setWiseIDs := perKey.loadRelease(fx), setWise.loadRelease(fx)
		perKey.tx(func(ex driver.Executor) (err error) {
			want, err = releaseEach(perKey, ex, keys, counts, now)
			return err
		})
		setWise.tx(func(ex driver.Executor) (err error) {
			got, err = ex.SemaphoreReleaseMany(setWise.ctx, keys, counts, now)
			return err
		})
		if len(got) != len(keys) {
			t.Fatalf("ReleaseMany returned %d promotions for %d keys", len(got), len(keys))
		}
		for i, k := range fx.Keys {
			if got[i].Jobs != want[i].Jobs || !sameSet(got[i].Queues, want[i].Queues) {
				t.Errorf("%s (%s): ReleaseMany promoted %+v, key by key %+v", k.Key, k.Why, got[i], want[i])
			}
			// The promoted jobs by id, in the key's promotion order: a
			// hand-off claims among them.
			if len(got[i].JobIDs) != got[i].Jobs {
				t.Errorf("%s (%s): ReleaseMany promoted %d jobs and named %d (%v)", k.Key, k.Why, got[i].Jobs, len(got[i].JobIDs), got[i].JobIDs)
			}
			byID := map[int64]string{}
			for name, id := range setWiseIDs {
				byID[id] = name
			}
			for _, id := range got[i].JobIDs {
				if name, ok := byID[id]; !ok || setWise.state(id) != driver.StateReady {
					t.Errorf("%s (%s): ReleaseMany named job %d (%q), which is not one of its jobs made ready", k.Key, k.Why, id, name)
				}
			}
			if k.Missing {
				continue
			}
			sw, pk := setWise.sem(k.Key), perKey.sem(k.Key)
			if sw.Value != pk.Value || sw.Limit != pk.Limit || sw.Blocked != pk.Blocked || !sw.ExpiresAt.Equal(pk.ExpiresAt) {
				t.Errorf("%s (%s): ReleaseMany left %+v, key by key %+v", k.Key, k.Why, sw, pk)
			}
			for _, j := range k.Blocked {
				if s, w := setWise.state(setWiseIDs[j.Name]), perKey.state(perKeyIDs[j.Name]); s != w {
					t.Errorf("%s (%s): job %s is %q after ReleaseMany, %q key by key", k.Key, k.Why, j.Name, s, w)
				}
			}
		}
	}},
)

// loadRelease writes the fixture's semaphores and blocked jobs and
// returns the jobs' ids by name: two databases' ids need not agree.
func (f *fixture) loadRelease(fx releaseFixture) map[string]int64 {
	f.t.Helper()
	ids := map[string]int64{}
	for _, k := range fx.Keys {
		var jobs []*driver.NewJob
		for _, j := range k.Blocked {
			jobs = append(jobs, job(j.Queue, keyed(k.Key, k.Limit), blocked, prio(j.Priority), named(j.Name)))
		}
		if len(jobs) > 0 {
			for i, id := range f.insert(T0.Add(-time.Hour), jobs...) {
				ids[k.Blocked[i].Name] = id
			}
		}
		if k.Missing {
			continue
		}
		in, err := time.ParseDuration(k.ExpiresIn)
		f.must(err)
		counted := len(k.Blocked)
		if k.Counted != nil {
			counted = *k.Counted
		}
		f.semaphore(k.Key, k.Value, k.Limit, counted, T0.Add(in))
	}
	return ids
}

// releaseEach is the per-key release, as driver.ReleaseOne does it
// for one key: lock, give back the slots capped at the limit, hand the
// free ones to blocked jobs, renew the expiry if any moved, save.
func releaseEach(f *fixture, ex driver.Executor, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	out := make([]driver.Promotion, len(keys))
	for i, key := range keys {
		s, ok, err := ex.SemaphoreLock(f.ctx, key, "")
		if err != nil || !ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		s.Value = min(s.Value+counts[i], s.Limit)
		if take := min(max(s.Value, 0), s.Blocked); take > 0 {
			if out[i], err = ex.LinePromote(f.ctx, key, take, now); err != nil {
				return nil, err
			}
			s.Value -= out[i].Jobs
			s.Blocked -= out[i].Jobs
			if out[i].Jobs < take {
				s.Blocked = 0
			}
			if out[i].Jobs > 0 && driver.Renews(s.ExpiresAt, now, s.Duration) {
				s.ExpiresAt = now.Add(s.Duration)
			}
		}
		if err := ex.SemaphoreSave(f.ctx, s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// testdata is the path of a file in the module's testdata directory.
func testdata(t *testing.T, parts ...string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(append([]string{dir, "testdata"}, parts...)...)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testdata: no go.mod above the test's directory")
		}
		dir = parent
	}
}
