package drivertest

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Every release keeps its key's release interval by driver.Released,
// set-wise (SemaphoreReleaseMany) and key by key (driver.ReleaseOne,
// through SemaphoreLock and SemaphoreSave) alike, to the microsecond: the
// release fixture's keys, released one slot at a time at T0, T0+80ms and
// T0+200ms.
var _ = add("semaphores",
	test{"ReleaseKeepsTheReleaseInterval", func(t *testing.T, f *fixture) {
		var fx releaseFixture
		b, err := os.ReadFile(testdata(t, "drivertest", "release-many.json"))
		f.must(err)
		f.must(json.Unmarshal(b, &fx))
		var keys []string
		var ones []int
		for _, k := range fx.Keys {
			keys, ones = append(keys, k.Key), append(ones, 1)
		}
		perKey, setWise := f, f.other()
		perKey.loadRelease(fx)
		setWise.loadRelease(fx)
		type timing struct {
			interval time.Duration
			last     time.Time
		}
		want := map[string]timing{}
		sampled := false
		for _, at := range []time.Duration{0, 80 * time.Millisecond, 200 * time.Millisecond} {
			now := T0.Add(at)
			for _, k := range fx.Keys {
				if !k.Missing {
					w := want[k.Key]
					w.interval, w.last = driver.Released(w.interval, w.last, perKey.sem(k.Key).Blocked, 1, now)
					want[k.Key] = w
				}
			}
			perKey.tx(func(ex driver.Executor) error {
				for _, k := range keys {
					if _, err := driver.ReleaseOne(perKey.ctx, ex, k, 1, now); err != nil {
						return err
					}
				}
				return nil
			})
			setWise.tx(func(ex driver.Executor) error {
				_, err := ex.SemaphoreReleaseMany(setWise.ctx, keys, ones, now)
				return err
			})
		}
		for _, k := range fx.Keys {
			if k.Missing {
				continue
			}
			w, pk, sw := want[k.Key].interval, perKey.sem(k.Key).Interval, setWise.sem(k.Key).Interval
			if pk != w || sw != w {
				t.Errorf("%s (%s): release interval %s key by key, %s set-wise; want %s", k.Key, k.Why, pk, sw, w)
			}
			sampled = sampled || w > 0
		}
		if !sampled {
			t.Fatal("no key of the fixture was sampled: nothing was tested")
		}
	}},
)
