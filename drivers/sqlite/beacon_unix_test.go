//go:build unix

package sqlite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBeaconDirectory: bq makes its beacon directory 0700 and its files
// 0600; it refuses a directory that is a link, that others may write to,
// or that another user owns, and never follows a link in it.
func TestBeaconDirectory(t *testing.T) {
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	base := t.TempDir()
	d := &engine{beacons: filepath.Join(base, "db-bq-beacons"), prefix: "bq_"}
	if err := d.Beacon(7, at); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(d.beacons); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("beacon directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if fi, err := os.Stat(d.beaconPath(7)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("beacon file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	if got := d.beaconAt(7); !got.Equal(at) {
		t.Errorf("beacon at %v, want %v", got, at)
	}

	// A link in the directory is neither followed nor read.
	target := filepath.Join(base, "elsewhere")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, d.beaconPath(8)); err != nil {
		t.Fatal(err)
	}
	if err := d.Beacon(8, at); err == nil {
		t.Error("a beacon that is a link was set through it")
	}
	if fi, _ := os.Stat(target); fi.ModTime().Equal(at) {
		t.Error("the link's target got the beacon's time")
	}
	if !d.beaconAt(8).IsZero() {
		t.Error("a beacon that is a link was read")
	}

	for _, c := range []struct {
		name  string
		make  func(dir string) error
		want  string
		setup bool
	}{
		{"link", func(dir string) error { return os.Symlink(t.TempDir(), dir) }, "not a directory", true},
		{"open", func(dir string) error {
			if err := os.Mkdir(dir, 0o777); err != nil {
				return err
			}
			return os.Chmod(dir, 0o777)
		}, "written by other users", true},
		{"another user's", func(dir string) error {
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
			return os.Chown(dir, 65534, 65534)
		}, "belongs to user 65534", os.Geteuid() == 0},
	} {
		if !c.setup {
			continue // only root can give a directory away
		}
		dir := filepath.Join(t.TempDir(), "db-bq-beacons")
		if err := c.make(dir); err != nil {
			t.Fatal(err)
		}
		e := &engine{beacons: dir, prefix: "bq_"}
		if err := e.Beacon(1, at); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("a beacon directory that is %s: %v, want it refused (%q)", c.name, err, c.want)
		}
	}
}
