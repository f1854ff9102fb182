package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	bqmysql "github.com/bqueue/bq/drivers/mysql"
	"github.com/bqueue/bq/internal/humanize"
	"github.com/bqueue/bq/internal/testdb"
)

// bqCmd runs one command line and returns its exit status and output.
func bqCmd(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(ctx, args, &env{stdout: &out, stderr: &errOut})
	return code, out.String(), errOut.String()
}

func TestUsage(t *testing.T) {
	t.Setenv("BQ_DSN", "")
	ctx := context.Background()
	cases := []struct {
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{nil, 2, "", "Commands:"},
		{[]string{"help"}, 0, "dispatcher", ""},
		{[]string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{[]string{"status"}, 2, "", "--dsn is required"},
		{[]string{"dispatcher"}, 2, "", "--dsn is required"},
		{[]string{"migrate", "up"}, 2, "", "--dsn is required"},
		{[]string{"migrate", "--dsn", "sqlite::memory:"}, 2, "", "want exactly one action"},
		{[]string{"migrate", "sideways", "--dsn", "sqlite::memory:"}, 2, "", `unknown action "sideways"`},
		{[]string{"migrate", "up", "--dsn", "sqlite::memory:", "--prefix", "Bad-Prefix"}, 2, "", "--prefix"},
		{[]string{"status", "--bogus"}, 2, "", "flag provided but not defined: --bogus"},
		{[]string{"status", "--dsn", "sqlite::memory:", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"dispatcher", "--dsn", "sqlite::memory:", "--log-level", "loud"}, 2, "", "--log-level"},
		{[]string{"demo", "-h"}, 0, "Usage: bq demo", ""},
		{[]string{"status", "--dsn", "mysql://nowhere"}, 1, "", "bq: "},
	}
	for _, c := range cases {
		code, stdout, stderr := bqCmd(t, ctx, c.args...)
		if code != c.code || !strings.Contains(stdout, c.inStdout) || !strings.Contains(stderr, c.inStderr) {
			t.Errorf("bq %s: exit %d, want %d (stdout %q must contain %q, stderr %q must contain %q)",
				strings.Join(c.args, " "), code, c.code, stdout, c.inStdout, stderr, c.inStderr)
		}
	}
}

type noteArgs struct{ Text string }

var note = bq.Define("cli_test.note", func(context.Context, noteArgs) error { return nil },
	bq.JobOptions[noteArgs]{Queue: "notes"})

// atLatest reports whether migrate up's output says the database is at
// the newest version.
func atLatest(out string) bool {
	m := regexp.MustCompile(`version (\d+) \(latest (\d+)\)`).FindStringSubmatch(out)
	return m != nil && m[1] == m[2]
}

func TestMigrateAndStatus(t *testing.T) {
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := db.fresh(t)

			// A SQLite file is created by migrate up only: see
			// TestMissingSQLiteFile.
			if db.name != "sqlite" {
				code, _, stderr := bqCmd(t, ctx, "status", "--dsn", dsn)
				if code != 1 || !strings.Contains(stderr, "missing or out of date") {
					t.Fatalf("status before migrating: exit %d, stderr %q; want exit 1 naming the missing migration", code, stderr)
				}
			}
			if code, stdout, stderr := bqCmd(t, ctx, "migrate", "up", "--dsn", dsn); code != 0 || !atLatest(stdout) {
				t.Fatalf("migrate up: exit %d\n%s%s", code, stdout, stderr)
			}
			code, stdout, _ := bqCmd(t, ctx, "migrate", "status", "--dsn", dsn)
			if code != 0 || !strings.Contains(stdout, "00001_init.sql") || !strings.Contains(stdout, "yes") {
				t.Fatalf("migrate status: exit %d\n%s", code, stdout)
			}
			if code, stdout, _ := bqCmd(t, ctx, "status", "--dsn", dsn); code != 0 || !strings.Contains(stdout, "no live jobs") {
				t.Fatalf("status of an empty database: exit %d\n%s", code, stdout)
			}

			client, err := bq.Open(ctx, dsn, bq.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			for range 3 {
				if _, err := note.Enqueue(ctx, client, noteArgs{"hi"}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := note.Enqueue(ctx, client, noteArgs{"later"}, bq.In(time.Hour)); err != nil {
				t.Fatal(err)
			}
			code, stdout, _ = bqCmd(t, ctx, "status", "--dsn", dsn)
			if code != 0 || !strings.Contains(stdout, "QUEUE") || !strings.Contains(stdout, "notes") {
				t.Fatalf("status: exit %d\n%s", code, stdout)
			}
			code, stdout, _ = bqCmd(t, ctx, "status", "--json", "--dsn", dsn)
			var got bq.Health
			if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil {
				t.Fatalf("status --json: exit %d, %v\n%s", code, err, stdout)
			}
			if q := got.Queues; len(q) != 1 || q[0].Queue != "notes" || q[0].Ready != 3 || q[0].Scheduled != 1 {
				t.Fatalf("status --json queues = %+v, want notes with 3 ready and 1 scheduled", q)
			}

			// One migration rolls back per call, down to version 0. The
			// numbers may leave gaps (a set reserved by work on another branch).
			versions := []int64{0}
			for _, m := range mustStatus(t, ctx, dsn) {
				versions = append(versions, m.Version)
			}
			for i := len(versions) - 2; i >= 0; i-- {
				v := versions[i]
				want := "version " + strconv.FormatInt(v, 10) + " "
				if code, stdout, stderr := bqCmd(t, ctx, "migrate", "down", "--dsn", dsn); code != 0 || !strings.Contains(stdout, want) {
					t.Fatalf("migrate down to %d: exit %d\n%s%s", v, code, stdout, stderr)
				}
			}
			if code, stdout, _ := bqCmd(t, ctx, "migrate", "down", "--dsn", dsn); code != 0 || !strings.Contains(stdout, "nothing to roll back") {
				t.Fatalf("second migrate down: exit %d\n%s", code, stdout)
			}
		})
	}
}

// TestMissingSQLiteFile: commands that read or tend a database refuse a
// SQLite file that does not exist, saying how to create it, and create
// nothing; migrate up creates it. A DSN with a slash too many or too few
// says how many it takes.
func TestMissingSQLiteFile(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/jobs.db"
	dsn := "sqlite://" + path
	for _, args := range [][]string{
		{"status"}, {"status", "--json"}, {"explain", "1"}, {"migrate", "status"}, {"migrate", "down"},
		{"dispatcher"}, {"ui", "--addr", "127.0.0.1:0"}, {"verify"}, {"verify", "--repair"},
	} {
		code, stdout, stderr := bqCmd(t, ctx, append(args, "--dsn", dsn)...)
		want := "bq: no such database file: " + path + " (create it with `bq migrate up --dsn " + dsn + "`)\n"
		if code != 1 || stderr != want {
			t.Errorf("bq %s on a missing file: exit %d, stderr %q, stdout %q; want exit 1 and %q", strings.Join(args, " "), code, stderr, stdout, want)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("bq %s created the missing file: %v", strings.Join(args, " "), err)
		}
	}
	if code, _, stderr := bqCmd(t, ctx, "status", "--dsn", dsn, "--prefix", "app_bq_"); code != 1 || !strings.Contains(stderr, "--dsn "+dsn+" --prefix app_bq_`") {
		t.Errorf("status --prefix on a missing file: exit %d, %q; want the migrate command with the prefix", code, stderr)
	}
	if code, stdout, stderr := bqCmd(t, ctx, "migrate", "up", "--dsn", dsn); code != 0 || !atLatest(stdout) {
		t.Fatalf("migrate up: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := bqCmd(t, ctx, "status", "--dsn", dsn); code != 0 || !strings.Contains(stdout, "no live jobs") {
		t.Fatalf("status after migrate up: exit %d\n%s%s", code, stdout, stderr)
	}
	for typo, hint := range map[string]string{
		"sqlite:///" + path:                         "4 slashes; an absolute path takes three: " + dsn,
		"sqlite://tmp/jobs.db":                      "write sqlite:///tmp/jobs.db (three slashes) for the absolute path /tmp/jobs.db, or sqlite:tmp/jobs.db",
		"sqlite://" + strings.Repeat("/", 3) + path: "6 slashes",
	} {
		for _, cmd := range []string{"status", "migrate up"} {
			code, _, stderr := bqCmd(t, ctx, append(strings.Fields(cmd), "--dsn", typo)...)
			if code != 1 || !strings.Contains(stderr, hint) {
				t.Errorf("bq %s --dsn %s: exit %d, %q; want exit 1 saying %q", cmd, typo, code, stderr, hint)
			}
		}
	}
	// Nothing but the database, its WAL files and no lock file.
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".migrate-lock") {
			t.Errorf("migrate up left %s behind", e.Name())
		}
	}
}

func TestDispatcherStopsOnCancel(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite://" + t.TempDir() + "/bq.db"
	if code, _, stderr := bqCmd(t, ctx, "migrate", "up", "--dsn", dsn); code != 0 {
		t.Fatalf("migrate up: %s", stderr)
	}
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	code, _, stderr := bqCmd(t, ctx, "dispatcher", "--dsn", dsn, "--interval", "50ms")
	if code != 0 || !strings.Contains(stderr, "bq stopped") {
		t.Fatalf("dispatcher: exit %d\n%s", code, stderr)
	}
}

func TestDemo(t *testing.T) {
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			args := []string{"demo"}
			if db.name != "sqlite" {
				args = append(args, "--dsn", db.fresh(t))
			}
			code, stdout, stderr := bqCmd(t, context.Background(), args...)
			if code != 0 {
				t.Fatalf("bq demo: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			want := []string{
				"acme     2 ready, 38 blocked",
				"globex   2 ready, 3 blocked",
				"discarded",
				// acme's 40 reach its limit; the small tenants' 5 do
				// when the workers start together, which a loaded
				// machine may stagger (never above 2: checked below).
				"(limit 2): acme 2, globex ",
				"acme     40 exports, the large tenant: first started at",
				"The small tenants' exports had all started by",
				"Every limit held",
				// The fair-share part: acme alone uses every slot, then shares.
				"acme alone ran up to ", // 9, every slot, unless the machine is loaded
				"globex   first started",
				"While all three had work, running on average: acme ",
			}
			if db.name == "sqlite" {
				want = append(want, "is deleted now; run `bq demo --keep` to keep it")
			} else {
				want = append(want, "  bq status --dsn "+shellQuote(args[2])+" --prefix bq_demo_\n", "  bq ui --dsn ")
			}
			for _, want := range want {
				if !strings.Contains(stdout, want) {
					t.Errorf("bq demo output lacks %q:\n%s", want, stdout)
				}
			}
			if !demoMost.MatchString(stdout) {
				t.Errorf("bq demo ran more than 2 of a tenant's exports at once:\n%s", stdout)
			}
			for _, l := range strings.Split(stderr, "\n") {
				// This test binary defines cli_test's jobs, which
				// the demo's clients rightly warn they do not work.
				if (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) && !strings.Contains(l, "cli_test.") {
					t.Errorf("bq demo logged a warning or an error: %s", l)
				}
			}
		})
	}
}

// demoMost is the demo's line of each tenant's most exports at once, every
// one within the limit of 2.
var demoMost = regexp.MustCompile(`Most exports running at once, per tenant \(limit 2\): acme 2, globex [12], initech [12]\.`)

func TestMaxOverlap(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	cases := []struct {
		ivs  []interval
		want int
	}{
		{nil, 0},
		{[]interval{{ms(0), ms(10)}}, 1},
		{[]interval{{ms(0), ms(10)}, {ms(10), ms(20)}}, 1}, // back to back
		{[]interval{{ms(0), ms(10)}, {ms(5), ms(20)}, {ms(9), ms(12)}}, 3},
		{[]interval{{ms(0), ms(10)}, {ms(5), ms(20)}, {ms(10), ms(12)}}, 2},
	}
	for _, c := range cases {
		if got := maxOverlap(c.ivs); got != c.want {
			t.Errorf("maxOverlap(%v) = %d, want %d", c.ivs, got, c.want)
		}
	}
	ivs := []interval{{ms(0), ms(25)}, {ms(5), ms(15)}, {ms(15), ms(30)}}
	if got, want := lane(ivs, ms(10), 4), "222."; got != want {
		t.Errorf("lane = %q, want %q", got, want)
	}
}

// testDatabase is a database the tests of this package run against.
type testDatabase struct {
	name  string
	fresh func(t *testing.T) string // DSN of a new, empty database
}

// testDatabases returns the databases BQ_TEST_DRIVERS selects (default:
// all) of the three this package's tests run on. A selected database that
// is unreachable fails the test (testdb).
func testDatabases(t *testing.T) []testDatabase {
	var out []testDatabase
	for _, name := range []string{testdb.SQLite, testdb.Postgres, testdb.MySQL} {
		if slices.Contains(testdb.Selected(t), name) {
			out = append(out, testDatabase{name, func(t *testing.T) string { return testdb.Fresh(t, name) }})
		}
	}
	return out
}

// postgresDSN is the PostgreSQL server the tests use.
func postgresDSN() string { return testdb.PostgresBaseDSN() }

// mysqlDSN is the MySQL server the tests use.
func mysqlDSN() string { return testdb.MySQLBaseDSN() }

// mysqlAdmin runs statements on the server of BQ_TEST_MYSQL_DSN.
func mysqlAdmin(t *testing.T) *sql.DB {
	dsn, err := bqmysql.DSN(mysqlDSN())
	if err != nil {
		t.Fatalf("BQ_TEST_MYSQL_DSN: %v", err)
	}
	db, err := sql.Open("mysql", dsn)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = db.PingContext(ctx)
		cancel()
	}
	if err != nil {
		t.Fatalf("MySQL is selected (BQ_TEST_DRIVERS) but unreachable at %s: %v", humanize.RedactDSN(mysqlDSN()), err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// mustStatus lists the migrations of the database at dsn, oldest first.
func mustStatus(t *testing.T, ctx context.Context, dsn string) []bq.Migration {
	t.Helper()
	c, err := bq.Open(ctx, dsn, bq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ms, err := c.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// migratedClient is a fresh database of db migrated by `bq migrate up`,
// and a client of it (closed when the test ends).
func migratedClient(t *testing.T, ctx context.Context, db testDatabase) (string, *bq.Client) {
	t.Helper()
	dsn := db.fresh(t)
	if code, out, errOut := bqCmd(t, ctx, "migrate", "up", "--dsn", dsn); code != 0 {
		t.Fatalf("migrate up: exit %d\n%s%s", code, out, errOut)
	}
	c, err := bq.Open(ctx, dsn, bq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return dsn, c
}
