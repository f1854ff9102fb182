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
// once would both try to create the tables. It holds an advisory lock
// (flock) on <database>.migrate-lock until unlock is called, and unlock
// removes the file. In-memory databases and databases passed to New
// (whose path bq does not know) are not locked.
//
// Removing the file is safe because the holder removes it before it lets
// go, and a process that gets the lock keeps it only if the path still
// names the file it locked: a waiter that opened the file before it was
// removed gets a lock on a file nobody else can open, sees that, and
// starts again on the path's new file.
func (d *engine) MigrationLock(ctx context.Context) (unlock func(), err error) {
	if d.path == "" || d.memory {
		return func() {}, nil
	}
	path := d.path + ".migrate-lock"
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open migration lock: %w", err)
		}
		if err := flock(ctx, f); err != nil {
			f.Close()
			return nil, err
		}
		if held(f, path) {
			return func() {
				_ = os.Remove(path)
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		f.Close() // a removed file: its lock guards nothing
	}
}

// flock takes an exclusive lock on f, polling so that ctx can end the
// wait.
func flock(ctx context.Context, f *os.File) error {
	return driver.PollMigrationLock(ctx, f.Name(), func() (bool, error) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return err == nil, err
	})
}

// held reports whether path still names the file f has open.
func held(f *os.File, path string) bool {
	open, err := f.Stat()
	if err != nil {
		return false
	}
	named, err := os.Stat(path)
	return err == nil && os.SameFile(open, named)
}
