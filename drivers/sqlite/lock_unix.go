//go:build unix

package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/bqueue/bq/internal/driver"
)

// MigrationLock serialises migrations of one database file across
// processes: goose has no lock for SQLite, and two processes migrating at
// once would both try to create the tables. It holds an advisory lock on
// a file beside the database until unlock is called. In-memory databases
// and databases passed to New (whose path bq does not know) are not locked.
func (d *engine) MigrationLock(ctx context.Context) (unlock func(), err error) {
	if d.path == "" || d.memory {
		return func() {}, nil
	}
	f, err := os.OpenFile(d.path+".migrate-lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open migration lock: %w", err)
	}
	err = driver.PollMigrationLock(ctx, f.Name(), func() (bool, error) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}
