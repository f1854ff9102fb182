package semaphore_test

import (
	"context"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/semaphore"
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
		if err := s.JobInsertMany(context.Background(), now, []*driver.NewJob{j}); err != nil {
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
	p, err := semaphore.Reclaim(ctx, s, "k", now)
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

// batchStore stands for a driver's release by counting its calls (the
// set-wise SQL is checked against per-key release on every database by
// the driver suite, internal/driver/drivertest).
type batchStore struct {
	*memstore.Store
	calls int
}

func (b *batchStore) SemaphoreReleaseMany(ctx context.Context, keys []string, counts []int, now time.Time) ([]driver.Promotion, error) {
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

// TestReleaseManyIsOneDriverCall: however many keys, the engine makes one
// release call, the driver choosing its way (set-wise, or key by key for
// one key where that is cheaper); an unkeyed batch makes none.
func TestReleaseManyIsOneDriverCall(t *testing.T) {
	ctx := context.Background()
	for _, keys := range [][]string{{"a", "b"}, {"a"}, nil} {
		st := &batchStore{Store: twoKeys(t)}
		if _, err := semaphore.ReleaseMany(ctx, st, keys, make([]int, len(keys)), now); err != nil {
			t.Fatal(err)
		}
		if want := min(len(keys), 1); st.calls != want {
			t.Errorf("ReleaseMany of %d keys called the driver's release %d times, want %d", len(keys), st.calls, want)
		}
	}
}

func TestReleaseManyKeyByKey(t *testing.T) {
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

// lockStore stands for a driver's BatchLocker by locking and saving key by
// key in the memory store, counting its calls (the set-wise SQL is
// checked by the driver suite, internal/driver/drivertest).
type lockStore struct {
	*memstore.Store
	locks, saves int
}

func (b *lockStore) SemaphoreLockMany(ctx context.Context, limits []driver.Limit, queues []string, now time.Time) ([]driver.Semaphore, error) {
	b.locks++
	out := make([]driver.Semaphore, len(limits))
	for i, l := range limits {
		if err := b.SemaphoreEnsure(ctx, l, now); err != nil {
			return nil, err
		}
		s, _, err := b.SemaphoreLock(ctx, l.Key, queues[i])
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

func (b *lockStore) SemaphoreSaveMany(ctx context.Context, sems []driver.Semaphore) error {
	b.saves++
	for _, s := range sems {
		if err := b.SemaphoreSave(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func TestLockManyActsAsLockOnEachKey(t *testing.T) {
	ctx := context.Background()
	limits := []driver.Limit{
		{Key: "a", To: 2, Duration: time.Minute},                    // override 4, one holder
		{Key: "b", To: 3, Duration: 2 * time.Minute, MaxBlocked: 7}, // new
		{Key: "c", Duration: time.Second},                           // new, the policy's limit and backlog
	}
	queues := []string{"q", "q", "p"}
	fill := func(s *memstore.Store) {
		keyed(t, s, "a", driver.StateReady)
		s.Semaphores["a"] = &driver.Semaphore{Key: "a", Value: 1, Limit: 2, Duration: time.Minute}
		s.Overrides["a"] = 4
		s.Policies["p"] = driver.Policy{Queue: "p", MaxActivePerKey: 5, MaxBlocked: 6}
	}
	for _, batch := range []bool{false, true} {
		plain := memstore.New()
		fill(plain)
		var ex driver.SemaphoreStore = plain
		many := &lockStore{Store: plain}
		if batch {
			ex = many
		}
		sems, err := semaphore.LockMany(ctx, ex, limits, queues, now)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []struct{ limit, free, maxBlocked int }{{4, 3, 0}, {3, 3, 7}, {5, 5, 6}} {
			if s := sems[i]; s.Limit() != want.limit || s.Free() != want.free || s.MaxBlocked() != want.maxBlocked {
				t.Errorf("batch %v: %s: limit %d, free %d, MaxBlocked %d; want %d, %d, %d", batch, limits[i].Key,
					s.Limit(), s.Free(), s.MaxBlocked(), want.limit, want.free, want.maxBlocked)
			}
			sems[i].Wait(1)
		}
		if err := semaphore.SaveMany(ctx, ex, sems); err != nil {
			t.Fatal(err)
		}
		for i, l := range limits {
			if got := plain.Semaphores[l.Key]; got.Duration != l.Duration || !got.ExpiresAt.Equal(now.Add(l.Duration)) {
				t.Errorf("batch %v: %s saved %+v; want Duration %v from the spec, expiring %v on", batch, l.Key, *got, l.Duration, l.Duration)
			} else if got.Value != sems[i].Free() {
				t.Errorf("batch %v: %s saved %d free, want %d", batch, l.Key, got.Value, sems[i].Free())
			}
		}
		if batch && (many.locks != 1 || many.saves != 1) {
			t.Errorf("LockMany and SaveMany of 3 keys called the batch locker %d and %d times, want 1 and 1", many.locks, many.saves)
		}
	}
}
