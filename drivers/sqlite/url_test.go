package sqlite

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseURL: three slashes before an absolute path, none before a
// relative one; a typo is refused with the spelling to use.
func TestParseURL(t *testing.T) {
	for _, c := range []struct{ dsn, path, err string }{
		{"sqlite:///tmp/x.db", "/tmp/x.db", ""},
		{"sqlite:///tmp/x.db?_foo=1", "/tmp/x.db", ""},
		{"sqlite:x.db", "x.db", ""},
		{"sqlite:dir/x.db", "dir/x.db", ""},
		{"sqlite::memory:", ":memory:", ""},
		{"sqlite://:memory:", ":memory:", ""},
		{"sqlite://", "", ""},
		{"sqlite:////tmp/x.db", "", "4 slashes; an absolute path takes three: sqlite:///tmp/x.db"},
		{"sqlite://///tmp/x.db", "", "5 slashes; an absolute path takes three: sqlite:///tmp/x.db"},
		{"sqlite://tmp/x.db", "", `not a host ("tmp"): write sqlite:///tmp/x.db (three slashes) for the absolute path /tmp/x.db, or sqlite:tmp/x.db for a path relative`},
		{"sqlite://x.db", "", `not a host ("x.db")`},
		{"postgres://x", "", "must start with sqlite:"},
	} {
		path, err := ParseURL(c.dsn)
		switch {
		case c.err == "" && (err != nil || path != c.path):
			t.Errorf("ParseURL(%q) = %q, %v; want %q", c.dsn, path, err, c.path)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseURL(%q) = %q, %v; want an error saying %q", c.dsn, path, err, c.err)
		}
	}
}

// TestOpenExisting: a missing file is an error wrapping fs.ErrNotExist
// and stays missing; an existing one opens.
func TestOpenExisting(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	if _, err := OpenExisting(ctx, path); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "no such database file: "+path) {
		t.Fatalf("OpenExisting of a missing file: %v, want no such database file wrapping fs.ErrNotExist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenExisting created %s: %v", path, err)
	}
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if d, err = OpenExisting(ctx, path); err != nil {
		t.Fatalf("OpenExisting of an existing file: %v", err)
	}
	d.Close()
}
