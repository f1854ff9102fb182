package mysql

import (
	"context"
	"strings"
	"testing"

	"github.com/bqueue/bq/internal/driver"
)

// TestUniqueLockRowsAreStripes: the lock rows of unique keys are their
// stripes (the hash's first two bytes), so the table never needs
// pruning: keys sharing a stripe share one row, however many there are.
func TestUniqueLockRowsAreStripes(t *testing.T) {
	ctx := context.Background()
	d := New(plainDB(t, testURL(t))).e()
	keys := []string{strings.Repeat("a", 64), "aaaa" + strings.Repeat("b", 60), "aaaa" + strings.Repeat("c", 60), strings.Repeat("b", 64)}
	for range 3 {
		for _, k := range keys {
			if err := driver.InTx(ctx, d, func(ex driver.Executor) error { return ex.UniqueLock(ctx, k) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	var rows, aaaa int
	if err := d.DB().QueryRowContext(ctx, "SELECT count(*), sum(stripe = 0xaaaa) FROM bq_unique_locks").Scan(&rows, &aaaa); err != nil {
		t.Fatal(err)
	}
	if rows != 2 || aaaa != 1 {
		t.Errorf("%d lock rows (%d of stripe aaaa) after locking %d keys of 2 stripes 3 times each, want 2 (1)", rows, aaaa, len(keys))
	}
}
