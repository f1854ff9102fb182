package mysql

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/bqueue/bq/internal/driver/drivertest"
	"github.com/bqueue/bq/internal/testdb"
	"github.com/bqueue/bq/migrations"
)

// shortBound lowers the bound for one test; set it before Open or DSN.
func shortBound(t *testing.T) {
	old := txIdleTimeout
	txIdleTimeout = drivertest.TestBound
	t.Cleanup(func() { txIdleTimeout = old })
}

// testURL creates a migrated database of the test's own on the server of
// BQ_TEST_MYSQL_DSN and returns its mysql:// URL; the database is dropped
// when the test ends. It skips when BQ_TEST_DRIVERS leaves MySQL out.
func testURL(t *testing.T) string {
	t.Helper()
	testdb.Require(t, testdb.MySQL)
	u := testdb.FreshMySQL(t)
	d := New(plainDB(t, u))
	p, err := migrations.NewProvider(d.DB(), "mysql", migrations.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(context.Background()); err != nil {
		t.Fatal(err)
	}
	return u
}

// plainDB opens rawURL without bq's session bounds: the other party of a
// test, whose own sessions must not time out.
func plainDB(t *testing.T, rawURL string) *sql.DB {
	t.Helper()
	cfg, err := ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"wait_timeout", "idle_transaction_timeout", "innodb_lock_wait_timeout"} {
		delete(cfg.Params, v)
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

// server reads the kind of server at db.
func server(t *testing.T, db *sql.DB) serverKind {
	t.Helper()
	version, err := serverVersion(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	s, err := checkVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rowLocked reports whether another session holds key's semaphore row.
func rowLocked(t *testing.T, other *sql.DB, key string) bool {
	t.Helper()
	ctx := context.Background()
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, "SELECT 1 FROM bq_semaphores WHERE key_hash = ? FOR UPDATE NOWAIT", hash(key))
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) && (myErr.Number == errLockWaitTimeout || myErr.Number == 3572) { // MariaDB, MySQL's ER_LOCK_NOWAIT
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}

// checkFrozenTxEnds freezes a bq transaction holding a row lock past the
// bound and checks the server ended it: the next statement fails, the lock
// is free, and the pool goes on with fresh connections, no error reaching
// bq's callers.
func checkFrozenTxEnds(t *testing.T, d *engine, other *sql.DB) {
	t.Helper()
	tx := drivertest.LockInTx(t, d, "g/frozen")
	drivertest.CheckFrozenTxEnds(t, d, tx, "g/frozen", drivertest.Frozen, func(key string) bool { return rowLocked(t, other, key) })
}

// openBounded opens, with the test's short bound, a driver on a migrated
// database of the test's own, and returns it with the database's URL.
func openBounded(t *testing.T) (*Driver, string) {
	t.Helper()
	shortBound(t)
	u := testURL(t)
	d, err := Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, u
}

// A bq transaction on the pool Open made is ended by the server once its
// client stays silent past the bound.
func TestFrozenTxEndsOpen(t *testing.T) {
	ctx := context.Background()
	d, u := openBounded(t)
	want := map[string]int{"innodb_lock_wait_timeout": 1, "wait_timeout": 1}
	if server(t, d.DB()).mariaDB {
		want = map[string]int{"innodb_lock_wait_timeout": 1, "idle_transaction_timeout": 1}
	}
	for v, n := range want {
		var got int
		if err := d.DB().QueryRowContext(ctx, "SELECT @@SESSION."+v).Scan(&got); err != nil || got != n {
			t.Errorf("@@SESSION.%s = %d, %v; want %d", v, got, err, n)
		}
	}
	checkFrozenTxEnds(t, d.e(), plainDB(t, u))
}

// A *sql.DB opened from DSN gets the bound too, through wait_timeout (the
// DSN cannot know the server's kind); the idle connections the server
// closes meanwhile never surface as errors.
func TestFrozenTxEndsDSN(t *testing.T) {
	shortBound(t)
	ctx := context.Background()
	u := testURL(t)
	dsn, err := DSN(u)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxIdleConns(4)
	var conns []*sql.Conn // idle connections for the server to close
	for range 3 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
	checkFrozenTxEnds(t, New(db).e(), plainDB(t, u))
}

// A bq statement waiting for a row lock gives up within the bound, as a
// retryable lock wait timeout, not after InnoDB's default 50 s.
func TestLockWaitBounded(t *testing.T) {
	ctx := context.Background()
	d, u := openBounded(t)
	holder := drivertest.LockInTx(t, New(plainDB(t, u)).e(), "g/held") // an unbounded session holds the row
	defer holder.Rollback(ctx)

	tx, err := d.e().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err = tx.SemaphoreLock(waitCtx, "g/held", "")
	waited := time.Since(start)
	if err == nil || !d.e().Retryable(err) {
		t.Fatalf("lock a held row: %v after %s, want a retryable lock wait timeout", err, waited)
	}
	if waited > 10*drivertest.TestBound {
		t.Errorf("waited %s for a held row, want about %s", waited, drivertest.TestBound)
	}
	t.Logf("gave up after %s: %v", waited, err)
}

// A URL's own settings win over bq's.
func TestOpenKeepsURLBounds(t *testing.T) {
	shortBound(t)
	ctx := context.Background()
	u := testURL(t)
	idle := "wait_timeout"
	if server(t, plainDB(t, u)).mariaDB {
		idle = "idle_transaction_timeout"
	}
	d, err := Open(ctx, u+"?innodb_lock_wait_timeout=7&"+idle+"=70")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	for v, n := range map[string]int{"innodb_lock_wait_timeout": 7, idle: 70} {
		var got int
		if err := d.DB().QueryRowContext(ctx, "SELECT @@SESSION."+v).Scan(&got); err != nil || got != n {
			t.Errorf("@@SESSION.%s = %d, %v; want the URL's %d", v, got, err, n)
		}
	}
}

func TestSetBounds(t *testing.T) {
	mariaDB, _ := checkVersion("10.11.6-MariaDB")
	mysql8, _ := checkVersion("8.0.36")
	for _, c := range []struct {
		name   string
		server *serverKind
		url    map[string]string
		want   map[string]string
	}{
		{"MariaDB", &mariaDB, nil,
			map[string]string{"innodb_lock_wait_timeout": "10", "idle_transaction_timeout": "10"}},
		{"MySQL 8", &mysql8, nil,
			map[string]string{"innodb_lock_wait_timeout": "10", "wait_timeout": "10"}},
		{"unknown server (DSN)", nil, nil,
			map[string]string{"innodb_lock_wait_timeout": "10", "wait_timeout": "10"}},
		{"MariaDB, the URL's own", &mariaDB, map[string]string{"innodb_lock_wait_timeout": "3", "idle_write_transaction_timeout": "4"},
			map[string]string{"innodb_lock_wait_timeout": "3", "idle_write_transaction_timeout": "4"}},
		{"MariaDB, a URL's wait_timeout is another matter", &mariaDB, map[string]string{"wait_timeout": "600"},
			map[string]string{"innodb_lock_wait_timeout": "10", "wait_timeout": "600", "idle_transaction_timeout": "10"}},
		{"MySQL 8, the URL's own", &mysql8, map[string]string{"wait_timeout": "600"},
			map[string]string{"innodb_lock_wait_timeout": "10", "wait_timeout": "600"}},
		{"DSN with MariaDB's variable", nil, map[string]string{"idle_transaction_timeout": "5"},
			map[string]string{"innodb_lock_wait_timeout": "10", "idle_transaction_timeout": "5"}},
	} {
		params := map[string]string{}
		for k, v := range c.url {
			params[k] = v
		}
		setBounds(params, c.server)
		if len(params) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, params, c.want)
			continue
		}
		for k, v := range c.want {
			if params[k] != v {
				t.Errorf("%s: %v, want %v", c.name, params, c.want)
			}
		}
	}
	if got := seconds(1500 * time.Millisecond); got != "2" {
		t.Errorf("seconds(1.5s) = %s, want 2 (rounded up)", got)
	}
	for wait, want := range map[time.Duration]time.Duration{
		10 * time.Second:    ConnMaxIdleTime,
		28800 * time.Second: 5 * time.Minute,
	} {
		if got := connMaxIdleTime(wait); got != want {
			t.Errorf("connMaxIdleTime(%s) = %s, want %s", wait, got, want)
		}
	}
}
