//go:build unix

package sqlite

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// checkOwner refuses a beacon directory another user owns.
func checkOwner(dir string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("the beacon directory %s belongs to user %d, not to this process's user %d: another user could keep dead processes from being reaped; remove it, and bq will create its own",
			dir, st.Uid, uid)
	}
	return nil
}

// touch sets the modification time of the file at path, creating it
// (0600) if missing, without following a symbolic link.
func touch(path string, at time.Time) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	tv := syscall.NsecToTimeval(at.UnixNano())
	if err := syscall.Futimes(int(f.Fd()), []syscall.Timeval{tv, tv}); err != nil {
		return fmt.Errorf("set the time of %s: %w", path, err)
	}
	return nil
}
