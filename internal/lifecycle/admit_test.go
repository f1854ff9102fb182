package lifecycle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/lifecycle"
)

// batchLocker stands for a driver's BatchLocker: key by key in the memory
// store, counting its calls (the SQL is checked by the driver suite).
type batchLocker struct {
	*memstore.Store
	locks, saves int
}

func (b *batchLocker) SemaphoreLockMany(ctx context.Context, limits []driver.Limit, queues []string, now time.Time) ([]driver.Semaphore, error) {
	b.locks++
	out := make([]driver.Semaphore, len(limits))
	for i, l := range limits {
		if err := b.SemaphoreEnsure(ctx, l, now); err != nil {
			return nil, err
		}
		var err error
		if out[i], _, err = b.SemaphoreLock(ctx, l.Key, queues[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (b *batchLocker) SemaphoreSaveMany(ctx context.Context, sems []driver.Semaphore) error {
	b.saves++
	for _, s := range sems {
		if err := b.SemaphoreSave(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// A batch over many keys decides each job as key-by-key admission does:
// blocked jobs take freed slots first, then priority, then input order;
// the rest block or are discarded, with one lock and one save for all.
func TestBatchAdmissionEqualsKeyByKey(t *testing.T) {
	setup := func() *memstore.Store {
		s := memstore.New()
		// Keys a and c: limit 1, taken, one job blocked; then a slot frees.
		for _, k := range []string{"a", "c"} {
			if _, _, err := lifecycle.Admit(ctx, s, []*driver.NewJob{job(k, 1, driver.Block, 0), job(k, 1, driver.Block, 0)}, now); err != nil {
				t.Fatal(err)
			}
			s.Semaphores[k].Value, s.Semaphores[k].Limit = 1, 2
			s.Overrides[k] = 2
		}
		return s
	}
	batch := func() []*driver.NewJob {
		var jobs []*driver.NewJob
		for i, k := range []string{"d", "a", "b", "c", "a", "b", "d", "b"} {
			onConflict := driver.Block
			if i%3 == 2 {
				onConflict = driver.Discard
			}
			jobs = append(jobs, job(k, 1, onConflict, i%2*5), job("", 0, driver.Block, 0))
		}
		return jobs
	}
	plain := setup()
	want, wantPromoted, err := lifecycle.Admit(ctx, plain, batch(), now)
	if err != nil {
		t.Fatal(err)
	}
	many := &batchLocker{Store: setup()}
	got, gotPromoted, err := lifecycle.Admit(ctx, many, batch(), now)
	if err != nil {
		t.Fatal(err)
	}
	if many.locks != 1 || many.saves != 1 {
		t.Errorf("a batch over 4 keys locked %d and saved %d times, want once each", many.locks, many.saves)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("batch admission:\n%v\nkey by key:\n%v", got, want)
	}
	if gotPromoted.Jobs != 2 || gotPromoted.Jobs != wantPromoted.Jobs {
		t.Errorf("batch admission promoted %d, key by key %d; want the 2 blocked jobs of a and c", gotPromoted.Jobs, wantPromoted.Jobs)
	}
	for _, k := range []string{"a", "b", "c", "d"} {
		honest(t, many.Store, k)
		if g, w := *many.Semaphores[k], *plain.Semaphores[k]; g != w {
			t.Errorf("semaphore %s: batch %+v, key by key %+v", k, g, w)
		}
	}
}
