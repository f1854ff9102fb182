package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/semaphore"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// keyed enqueues n jobs of key in state, priorities as given (0 when
// short), straight into the store.
func keyed(t *testing.T, s *memstore.Store, key string, state driver.JobState, prio ...int) []int64 {
	t.Helper()
	var ids []int64
	for i := range max(len(prio), 1) {
		j := &driver.NewJob{Kind: "k", Queue: "q", Limit: driver.Limit{Key: key, To: 2}, State: state}
		if i < len(prio) {
			j.Priority = prio[i]
		}
		if err := s.InsertJobs(context.Background(), now, []*driver.NewJob{j}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return ids
}

func TestLimitResolution(t *testing.T) {
	for _, c := range []struct {
		to, override, perKey, want int
	}{
		{0, 0, 0, 1}, {3, 0, 0, 3}, {0, 0, 4, 4}, {3, 0, 4, 3}, {3, 5, 4, 5}, {0, 5, 0, 5},
	} {
		got := semaphore.Limit(driver.Limit{To: c.to}, c.override, driver.Policy{MaxActivePerKey: c.perKey})
		if got != c.want {
			t.Errorf("Limit(To %d, override %d, policy %d) = %d, want %d", c.to, c.override, c.perKey, got, c.want)
		}
	}
}

func TestReleaseNeverRaisesFreeAboveLimit(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	l := driver.Limit{Key: "k", To: 2, Duration: time.Minute}
	sem, err := semaphore.Lock(ctx, s, l, "q", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := sem.Save(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := semaphore.Release(ctx, s, "k", now); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Semaphores["k"]; got.Value != 2 || got.Limit != 2 {
		t.Fatalf("after three releases of an idle key: value %d, limit %d; want 2, 2", got.Value, got.Limit)
	}
}

func TestReleasePromotesHighestPriorityThenOldest(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	keyed(t, s, "k", driver.StateReady)
	keyed(t, s, "k", driver.StateReady)
	blocked := keyed(t, s, "k", driver.StateBlocked, 0, 5, 5, 1)
	s.Semaphores["k"] = &driver.Semaphore{Key: "k", Value: 0, Limit: 2, Blocked: 4, Duration: time.Minute}

	// Two holders finish: their slots pass to the two priority-5 jobs, the
	// older first.
	for _, r := range s.Of("k", driver.StateReady)[:2] {
		r.State = driver.StateCompleted
	}
	p, err := semaphore.ReleaseN(ctx, s, "k", 2, now)
	if err != nil {
		t.Fatal(err)
	}
	if p.Jobs != 2 || len(p.Queues) != 1 || p.Queues[0] != "q" {
		t.Fatalf("promotion %+v, want 2 jobs of queue q", p)
	}
	for i, id := range blocked {
		want := driver.StateBlocked
		if i == 1 || i == 2 {
			want = driver.StateReady
		}
		if got := s.Jobs[id].State; got != want {
			t.Errorf("blocked job %d (priority %d): %s, want %s", i, s.Jobs[id].Priority, got, want)
		}
	}
	if msg := s.Honest("k"); msg != "" {
		t.Errorf("semaphore after release: %s (%+v)", msg, *s.Semaphores["k"])
	}
}

func TestLockMovesFreeSlotsByTheChangeOfLimit(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	keyed(t, s, "k", driver.StateReady)
	s.Semaphores["k"] = &driver.Semaphore{Key: "k", Value: 1, Limit: 2, Duration: time.Minute}
	s.Overrides["k"] = 4
	sem, err := semaphore.Lock(ctx, s, driver.Limit{Key: "k", To: 2}, "q", now)
	if err != nil {
		t.Fatal(err)
	}
	if sem.Limit() != 4 || sem.Free() != 3 {
		t.Fatalf("override 4 with one holder: limit %d, free %d; want 4, 3", sem.Limit(), sem.Free())
	}
	// Lowering below the holders admits nothing until they drain.
	s.Overrides["k"] = 1
	keyed(t, s, "k", driver.StateReady)
	s.Semaphores["k"] = &driver.Semaphore{Key: "k", Value: 0, Limit: 2, Duration: time.Minute}
	sem, err = semaphore.Lock(ctx, s, driver.Limit{Key: "k", To: 2}, "q", now)
	if err != nil {
		t.Fatal(err)
	}
	if sem.Free() != 0 || sem.Wait(1) != 0 {
		t.Fatalf("limit lowered to 1 under 2 holders: %d free, want 0", sem.Free())
	}
}

func TestWaitTakesOnlyFreeSlotsAndRenews(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	sem, err := semaphore.Lock(ctx, s, driver.Limit{Key: "k", To: 3, Duration: time.Minute}, "q", now)
	if err != nil {
		t.Fatal(err)
	}
	if got := sem.Wait(5); got != 3 {
		t.Fatalf("Wait(5) on 3 free slots took %d", got)
	}
	if got := sem.Wait(1); got != 0 {
		t.Fatalf("Wait(1) on a full key took %d", got)
	}
	if err := sem.Save(ctx); err != nil {
		t.Fatal(err)
	}
	if exp := s.Semaphores["k"].ExpiresAt; !exp.Equal(now.Add(time.Minute)) {
		t.Errorf("expiry %v, want now + Duration", exp)
	}
}

func TestRecountFreesOnlyTheSlotsOfGoneHolders(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	keyed(t, s, "k", driver.StateReady)
	keyed(t, s, "k", driver.StateBlocked, 0, 0)
	// The semaphore lost count: it believes both slots are taken and
	// nothing waits.
	s.Semaphores["k"] = &driver.Semaphore{Key: "k", Value: 0, Limit: 2, Duration: time.Minute}
	p, err := semaphore.Recount(ctx, s, "k", now)
	if err != nil {
		t.Fatal(err)
	}
	if p.Jobs != 1 {
		t.Fatalf("recount promoted %d jobs, want 1 (one live holder, limit 2)", p.Jobs)
	}
	if msg := s.Honest("k"); msg != "" {
		t.Errorf("after recount: %s (%+v)", msg, *s.Semaphores["k"])
	}
	if got := len(s.Of("k", driver.StateBlocked)); got != 1 {
		t.Errorf("%d jobs still blocked, want 1", got)
	}
}

// batchStore stands for a driver's BatchReleaser by counting its calls
// (the set-wise SQL is checked against per-key release on every database
// by the driver suite, internal/driver/drivertest).
type batchStore struct {
	*memstore.Store
	calls int
}

func (b *batchStore) ReleaseMany(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
	b.calls++
	return make([]driver.Promotion, len(keys)), nil
}

// twoKeys has keys a and b, each with both slots taken by finished
// holders and three jobs blocked, priorities 0, 2, 1.
func twoKeys(t *testing.T) *memstore.Store {
	s := memstore.New()
	for _, k := range []string{"a", "b"} {
		keyed(t, s, k, driver.StateBlocked, 0, 2, 1)
		s.Semaphores[k] = &driver.Semaphore{Key: k, Value: 0, Limit: 2, Blocked: 3, Duration: time.Minute}
	}
	return s
}

func TestReleaseManyUsesTheBatchReleaserForSeveralKeys(t *testing.T) {
	ctx := context.Background()
	many := &batchStore{Store: twoKeys(t)}
	if _, err := semaphore.ReleaseMany(ctx, many, []string{"a", "b"}, []int{2, 2}, now); err != nil {
		t.Fatal(err)
	}
	if many.calls != 1 {
		t.Errorf("ReleaseMany of two keys called the batch releaser %d times, want 1", many.calls)
	}
	one := &batchStore{Store: twoKeys(t)}
	if _, err := semaphore.ReleaseMany(ctx, one, []string{"a"}, []int{2}, now); err != nil {
		t.Fatal(err)
	}
	if one.calls != 0 {
		t.Errorf("ReleaseMany of one key called the batch releaser %d times, want 0 (ReleaseN)", one.calls)
	}
}

func TestReleaseManyWithoutABatchReleaserReleasesEachKey(t *testing.T) {
	ctx := context.Background()
	s := twoKeys(t)
	got, err := semaphore.ReleaseMany(ctx, s, []string{"a", "b"}, []int{2, 2}, now)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []string{"a", "b"} {
		if got[i].Jobs != 2 {
			t.Errorf("key %s promoted %d jobs, want its 2 freed slots filled", k, got[i].Jobs)
		}
		if left := s.Of(k, driver.StateBlocked); len(left) != 1 || left[0].Priority != 0 {
			t.Errorf("key %s left %d blocked, want only its lowest priority job", k, len(left))
		}
		if msg := s.Honest(k); msg != "" {
			t.Errorf("semaphore %s: %s (%+v)", k, msg, *s.Semaphores[k])
		}
	}
}
