package driver

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"
)

// MigrationLockWait is how long MigrationLock waits for another process's
// migration before it gives up: far longer than any of bq's migrations.
const MigrationLockWait = 5 * time.Minute

// PollMigrationLock calls try until it takes the lock, ctx ends or
// MigrationLockWait passes. Databases whose lock cannot wait on a context
// (PostgreSQL's pg_try_advisory_lock, a file lock) poll it this way.
func PollMigrationLock(ctx context.Context, what string, try func() (bool, error)) error {
	deadline := time.Now().Add(MigrationLockWait)
	for {
		got, err := try()
		if err != nil {
			return fmt.Errorf("take migration lock %s: %w", what, err)
		}
		if got {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("take migration lock %s: another process has held it for %s; is a migration stuck?", what, MigrationLockWait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("take migration lock %s: %w", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// MigrationLockKey keys the migration lock of the bq tables named with
// prefix in scope (a schema or database), so separate installations on
// one server do not wait on each other.
func MigrationLockKey(scope, prefix string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(scope + "." + prefix))
	return h.Sum64()
}
