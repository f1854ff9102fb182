package postgres

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/drivertest"
	"github.com/bqueue/bq/internal/testdb"
)

// TestListenDSN: listen_dsn is taken out of the DSN (pgx would send it to
// the server), and the listener's connection is its URL completed from
// the DSN: user, password, database and parameters when it leaves them
// out, never the DSN's port, never the pool's own parameters.
func TestListenDSN(t *testing.T) {
	main := "postgres://app:hunter2@pgbouncer:6432/app?sslmode=disable&pool_max_conns=3&application_name=web"
	for _, c := range []struct {
		name, dsn, rest               string
		host                          string
		port                          uint16
		user, password, db, appName   string
		searchPath                    string
		noListener                    bool
		hasSearchPath, hasPoolMaxConn bool
	}{
		{name: "none", dsn: main, rest: main, noListener: true},
		{name: "host only", dsn: main + "&listen_dsn=postgres://db.internal",
			rest: main, host: "db.internal", port: 5432, user: "app", password: "hunter2", db: "app", appName: "web"},
		{name: "first, encoded, port", dsn: "postgres://app:hunter2@pgbouncer:6432/app?listen_dsn=postgres%3A%2F%2Fdb%3A5433&sslmode=disable",
			rest: "postgres://app:hunter2@pgbouncer:6432/app?sslmode=disable", host: "db", port: 5433, user: "app", password: "hunter2", db: "app"},
		{name: "its own user, database and parameters", dsn: main + "&listen_dsn=" + url.QueryEscape("postgres://listener:s3cret@db:5432/other?application_name=listen&search_path=s"),
			rest: main, host: "db", port: 5432, user: "listener", password: "s3cret", db: "other", appName: "listen", searchPath: "s"},
		{name: "the DSN's fragment kept", dsn: "postgres://app@pgbouncer/app?listen_dsn=postgres://db#x",
			rest: "postgres://app@pgbouncer/app#x", host: "db", port: 5432, user: "app", db: "app"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rest, cfg, err := splitListenDSN(c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			if rest != c.rest {
				t.Errorf("the DSN without listen_dsn: %q, want %q", rest, c.rest)
			}
			if c.noListener {
				if cfg != nil {
					t.Errorf("a listener's configuration from a DSN without listen_dsn: %+v", cfg)
				}
				return
			}
			if cfg == nil {
				t.Fatal("no listener configuration")
			}
			if cfg.Host != c.host || cfg.Port != c.port || cfg.User != c.user || cfg.Password != c.password || cfg.Database != c.db {
				t.Errorf("listener %s@%s:%d/%s (password %q), want %s@%s:%d/%s (%q)", cfg.User, cfg.Host, cfg.Port, cfg.Database, cfg.Password,
					c.user, c.host, c.port, c.db, c.password)
			}
			if got := cfg.RuntimeParams["application_name"]; got != c.appName {
				t.Errorf("application_name %q, want %q", got, c.appName)
			}
			if got := cfg.RuntimeParams["search_path"]; got != c.searchPath {
				t.Errorf("search_path %q, want %q", got, c.searchPath)
			}
			for _, p := range []string{"pool_max_conns", ListenDSNParam} {
				if _, ok := cfg.RuntimeParams[p]; ok {
					t.Errorf("the listener would send %s to the server", p)
				}
			}
			if strings.Contains(c.dsn, "sslmode=disable") && cfg.TLSConfig != nil {
				t.Error("the listener ignores the DSN's sslmode=disable")
			}
		})
	}
}

// TestListenDSNRefused: a listen_dsn bq cannot use fails Open, before
// any connection, saying how to write it, and never shows a password.
func TestListenDSNRefused(t *testing.T) {
	main := "postgres://app:hunter2@127.0.0.1:1/app?sslmode=disable"
	for _, c := range []struct{ dsn, want string }{
		{main + "&listen_dsn=", "listen_dsn is empty: write it as listen_dsn=postgres://host:5432"},
		{main + "&listen_dsn=db.internal:5432", "is not a postgres:// URL: write it as listen_dsn=postgres://host:5432"},
		{main + "&listen_dsn=" + url.QueryEscape("mysql://root:hunter3@db/x"), "listen_dsn=mysql://root:***@db/x is not a postgres:// URL"},
		{main + "&listen_dsn=" + url.QueryEscape("postgres://app:hunter3@/app"), "listen_dsn=postgres://app:***@/app names no host"},
		{main + "&listen_dsn=postgres://a&listen_dsn=postgres://b", "sets listen_dsn 2 times"},
		{main + "&listen_dsn=postgres%zz", "is not percent-encoded properly"},
		{main + "&listen_dsn=" + url.QueryEscape("postgres://db/app?listen_dsn=postgres://x"), "holds a listen_dsn of its own"},
		{main + "&listen_dsn=" + url.QueryEscape("postgres://app:hunter3@db/app?connect_timeout=x"), "listen_dsn=postgres://app:***@db/app?connect_timeout=x: "},
		{"host=127.0.0.1 port=1 user=app password=hunter2 listen_dsn=postgres://db", "listen_dsn is read from a postgres:// URL only"},
	} {
		_, err := Open(context.Background(), c.dsn)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%q): %v\nwant an error saying %q", c.dsn, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "hunter") {
			t.Errorf("Open(%q): %v shows a password", c.dsn, err)
		}
	}
}

func TestSetsExecMode(t *testing.T) {
	wantPredicate(t, "setsExecMode", setsExecMode, map[string]bool{
		"postgres://db/app": false,
		"postgres://db/app?default_query_exec_mode=cache_statement":    true,
		"postgresql://db/app?sslmode=disable&default_query_exec_mode=": true,
		"host=db default_query_exec_mode=exec":                         true,
		"host=db application_name=default_query_exec_mode":             false,
	})
}

// TestOpenFindsPgBouncer: through PgBouncer in transaction mode, which
// refuses bq's startup parameter (or, told to ignore it, drops it), Open
// bounds bq's transactions itself and runs no named prepared statements,
// unless the DSN chooses how; straight to PostgreSQL it changes nothing.
func TestOpenFindsPgBouncer(t *testing.T) {
	testdb.Require(t, testdb.Postgres)
	ctx := context.Background()
	refusing := testdb.PrivatePgBouncer(t)
	ignoring := testdb.PrivatePgBouncer(t, "ignore_startup_parameters = "+idleTimeoutParam)
	check := func(name, dsn string, pooled bool, mode pgx.QueryExecMode) {
		t.Helper()
		d, err := Open(ctx, dsn)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer d.Close()
		cfg := d.Pool().Config().ConnConfig
		_, param := cfg.RuntimeParams[idleTimeoutParam]
		if want := milliseconds(txIdleTimeout); pooled && (d.e().txIdle != want || param) {
			t.Errorf("%s: SET LOCAL %q, startup parameter %v; want SET LOCAL %s and no parameter", name, d.e().txIdle, param, want)
		} else if !pooled && (d.e().txIdle != "" || !param) {
			t.Errorf("%s: SET LOCAL %q, startup parameter %v; want the session's bound", name, d.e().txIdle, param)
		}
		if cfg.DefaultQueryExecMode != mode {
			t.Errorf("%s: mode %v, want %v", name, cfg.DefaultQueryExecMode, mode)
		}
	}
	check("direct", testdb.FreshPostgres(t), false, pgx.QueryExecModeCacheStatement)
	check("refusing", refusing.FreshPostgres(t, false), true, pgx.QueryExecModeExec)
	check("ignoring", ignoring.FreshPostgres(t, false), true, pgx.QueryExecModeExec)
	check("the DSN's mode", refusing.FreshPostgres(t, false)+"&default_query_exec_mode=cache_describe", true, pgx.QueryExecModeCacheDescribe)

	// Another parameter the pooler refuses is the DSN's to fix.
	_, err := Open(ctx, refusing.FreshPostgres(t, false)+"&search_path=x")
	if err == nil || !strings.Contains(err.Error(), "unsupported startup parameter: search_path") || !strings.Contains(err.Error(), "ALTER ROLE") {
		t.Errorf("a parameter PgBouncer refuses: %v; want it named, with the fix", err)
	}
}

// A bq transaction through PgBouncer is bounded all the same: the server
// ends it once its client stays silent past the bound (SET LOCAL).
func TestFrozenTxEndsThroughPgBouncer(t *testing.T) {
	testdb.Require(t, testdb.Postgres)
	shortBound(t)
	ctx := context.Background()
	b := testdb.PrivatePgBouncer(t)
	d, err := Open(ctx, b.FreshPostgres(t, false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	drivertest.Migrate(t, d.e())
	other, err := pgx.Connect(ctx, testdb.PostgresBaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	var schema string
	if err := d.Pool().QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, "SET search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	checkFrozenTxEnds(t, d.e(), other)
}

// listenFor runs d's listener until the test ends, reporting what it
// wakes and what it hands failed.
func listenFor(t *testing.T, d *engine) (woken <-chan string, failures <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, f := make(chan string, 100), make(chan error, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Listen(ctx, "me", func(q string) { w <- q }, func(err error) { f <- err })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w, f
}

// TestListenerThroughPgBouncer: a listener on a connection of the pool,
// through PgBouncer in transaction mode, hears nothing; it says so once,
// naming the bouncer and listen_dsn, and goes on checking. On listen_dsn,
// straight to PostgreSQL, it hears what is notified through the bouncer,
// and says nothing. A listen_dsn reaching another database is deaf too,
// and said to be.
func TestListenerThroughPgBouncer(t *testing.T) {
	testdb.Require(t, testdb.Postgres)
	ctx := context.Background()
	b := testdb.PrivatePgBouncer(t)
	open := func(dsn string) *engine {
		t.Helper()
		d, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		d.e().probe = probeTimes{wait: time.Second, recheck: 300 * time.Millisecond}
		return d.e()
	}
	expectDeaf := func(d *engine, want ...string) {
		t.Helper()
		woken, failures := listenFor(t, d)
		select {
		case err := <-failures:
			deaf, ok := errors.AsType[*driver.DeafListener](err)
			if !ok {
				t.Fatalf("the listener failed with %v, want a *driver.DeafListener", err)
			}
			for _, w := range want {
				if !strings.Contains(deaf.Reason, w) {
					t.Errorf("the warning %q does not say %q", deaf.Reason, w)
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the listener said nothing within 10s of listening through PgBouncer")
		}
		// It checks again every 300ms, and says nothing more.
		time.Sleep(time.Second)
		select {
		case err := <-failures:
			t.Errorf("the listener said more than once: %v", err)
		default:
		}
		if len(woken) == 0 {
			t.Error("the listener never woke every queue on listening")
		}
	}

	bouncer := "127.0.0.1:" + strconv.Itoa(b.Port)
	expectDeaf(open(b.FreshPostgres(t, false)), "notifications through "+bouncer+" are not delivered", "listen_dsn=postgres://host:5432")

	wrong, _ := url.Parse(testdb.PostgresBaseDSN())
	wrong.Path = "/postgres" // another database of the same server
	expectDeaf(open(b.FreshPostgres(t, false)+"&listen_dsn="+url.QueryEscape(wrong.String())),
		"do not reach bq's listener at "+wrong.Host+" (listen_dsn)", "the same database")

	d := open(b.FreshPostgres(t, true))
	woken, failures := listenFor(t, d)
	next := func() string {
		t.Helper()
		select {
		case q := <-woken:
			return q
		case err := <-failures:
			t.Fatalf("the listener on listen_dsn: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("the listener on listen_dsn heard nothing within 10s")
		}
		return ""
	}
	if q := next(); q != "" {
		t.Fatalf("first ready(%q), want \"\" once listening", q)
	}
	// Past the probe's wait: the listener has heard its probe.
	time.Sleep(1500 * time.Millisecond)
	if err := d.Notify(ctx, "you", []string{"q1"}); err != nil {
		t.Fatal(err)
	}
	// Other tests' processes share the database, and so its
	// notification channel: their queues are heard too.
	for q := next(); q != "q1"; q = next() {
		t.Logf("ready(%q) from another test's process", q)
	}
	select {
	case err := <-failures:
		t.Errorf("the listener on listen_dsn: %v", err)
	default:
	}
}

// TestMigrationLockThroughPgBouncer: the migration lock excludes through
// PgBouncer in transaction mode, and more migrators than the bouncer has
// server connections for the database (4) get it in turn: a waiter holds
// no server connection, so the holder's statements find one.
func TestMigrationLockThroughPgBouncer(t *testing.T) {
	testdb.Require(t, testdb.Postgres)
	ctx := context.Background()
	dsn := testdb.PrivatePgBouncer(t).FreshPostgres(t, false)
	var holders, most atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		d, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		wg.Go(func() {
			unlock, err := d.e().MigrationLock(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer unlock()
			n := holders.Add(1)
			defer holders.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			// The holder's own statements, beside its lock.
			for range 3 {
				if _, err := d.Pool().Exec(ctx, "SELECT pg_sleep(0.02)"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("6 migrators did not all take and release the lock within 60s")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d migrators held the lock at once, want 1", m)
	}
}

// TestListenerLateProbe: a probe merely late (here: given no time at
// all) is reported once, and the listener keeps its connection, hearing
// the next probe and every notification after it.
func TestListenerLateProbe(t *testing.T) {
	d := testDriver(t)
	d.probe = probeTimes{wait: time.Nanosecond, recheck: 5 * time.Second}
	woken, failures := listenFor(t, d)
	select {
	case err := <-failures:
		if _, ok := errors.AsType[*driver.DeafListener](err); !ok {
			t.Fatalf("the listener failed with %v, want a *driver.DeafListener", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a probe given no time was not reported within 10s")
	}
	if q := <-woken; q != "" {
		t.Fatalf("first ready(%q), want \"\" once listening", q)
	}
	if err := d.Notify(context.Background(), "you", []string{"q1"}); err != nil {
		t.Fatal(err)
	}
	// Other tests' processes share the database, and so its
	// notification channel: their queues are heard too.
	for heard := false; !heard; {
		select {
		case q := <-woken:
			heard = q == "q1"
		case err := <-failures:
			t.Fatalf("the listener: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("the listener reported late lost what was notified next")
		}
	}
	select {
	case err := <-failures:
		t.Errorf("the listener said more: %v", err)
	default:
	}
}
