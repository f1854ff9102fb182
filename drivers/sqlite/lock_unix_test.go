//go:build unix

package sqlite

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestMigrationLock: holders of the lock never overlap, though every
// unlock removes the lock file under waiters that opened it, and no lock
// file is left behind. Each take opens the file anew, so the goroutines
// contend as processes do (flock locks an open file, not a process).
func TestMigrationLock(t *testing.T) {
	d := &engine{path: filepath.Join(t.TempDir(), "jobs.db")}
	ctx := context.Background()
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				unlock, err := d.MigrationLock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				inside.Add(-1)
				unlock()
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Errorf("%d holders of the migration lock at once, want 1", m)
	}
	if _, err := os.Stat(d.path + ".migrate-lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the lock file is left behind: %v", err)
	}
}
