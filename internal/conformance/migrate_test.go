package conformance

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

var _ = register(
	scenario{"MigrationsAtOnce", testMigrationsAtOnce},
)

// testMigrationsAtOnce: processes that start together all migrate; the
// migration lock makes every one but the first wait, and each ends with
// the whole schema. A migration waits while another holds the lock.
func testMigrationsAtOnce(t *testing.T, h *harness) {
	ctx := context.Background()
	cfg := testConfig()
	cfg.Prefix = "mig_"
	holder := h.clientWith(cfg)
	unlock, err := driver.ClientEngine(holder).MigrationLock(ctx)
	if err != nil {
		t.Fatalf("take the migration lock: %v", err)
	}
	waiting := make(chan error, 1)
	go func() { waiting <- h.clientWith(cfg).Migrate(ctx) }()
	select {
	case err := <-waiting:
		t.Fatalf("Migrate returned (%v) while another process held the migration lock", err)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	if err := <-waiting; err != nil {
		t.Fatalf("Migrate after the lock was released: %v", err)
	}

	cfg.Prefix = "mig2_"
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		c := h.clientWith(cfg)
		wg.Go(func() { errs[i] = c.Migrate(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migration %d of %d at once: %v", i+1, len(errs), err)
		}
	}
	st, err := h.clientWith(cfg).MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st {
		if !m.Applied {
			t.Errorf("migration %d %s is not applied", m.Version, m.Name)
		}
	}
	c := h.clientWith(cfg)
	if _, err := c.QueueStats(ctx); err != nil {
		t.Errorf("the migrated tables do not answer: %v", err)
	}
}
