package bq

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A PostgreSQL-only program (testdata/pgonly: bq and drivers/postgres)
// links no other driver: the root package imports none, each driver
// registers itself when imported. Asked for a SQLite DSN, it names the
// import to add.
func TestPostgresOnlyLinksNoOtherDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "./testdata/pgonly").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, banned := range []string{"modernc.org/sqlite", "github.com/go-sql-driver/mysql",
		"github.com/bqueue/bq/drivers/sqlite", "github.com/bqueue/bq/drivers/mysql"} {
		for _, d := range deps {
			if d == banned || strings.HasPrefix(d, banned+"/") {
				t.Errorf("a PostgreSQL-only program links %s", d)
			}
		}
	}
	if !slices.Contains(deps, "github.com/bqueue/bq/drivers/postgres") {
		t.Fatalf("go list -deps lists no drivers/postgres: the check proves nothing\n%s", out)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "pgonly")
	if out, err := exec.Command(goTool, "build", "-o", bin, "./testdata/pgonly").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := exec.Command(bin)
	dsn := "sqlite://" + filepath.Join(dir, "jobs.db")
	run.Env = append(run.Environ(), "DATABASE_URL="+dsn)
	out, err = run.CombinedOutput()
	want := `bq.Open: no driver for "` + dsn + `": add import _ "github.com/bqueue/bq/drivers/sqlite"`
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("pgonly on a SQLite DSN: %v, %q; want the error %q", err, out, want)
	}
}
