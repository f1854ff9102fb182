//go:build !unix

package sqlite

import (
	"io/fs"
	"os"
	"time"
)

// checkOwner cannot tell a directory's owner here.
func checkOwner(string, fs.FileInfo) error { return nil }

// touch sets the modification time of the file at path, creating it if
// missing.
func touch(path string, at time.Time) error {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return &fs.PathError{Op: "touch", Path: path, Err: fs.ErrInvalid}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	return os.Chtimes(path, at, at)
}
