package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/migrations"
)

// testBound stands in for TxIdleTimeout so the tests wait seconds, not
// tens of seconds; frozen is how long a client stays silent in them: the
// bound with room for a loaded machine.
const (
	testBound = time.Second
	frozen    = 3 * testBound
)

// shortBound lowers the bound for one test; set it before Open or DSN.
func shortBound(t *testing.T) {
	old := txIdleTimeout
	txIdleTimeout = testBound
	t.Cleanup(func() { txIdleTimeout = old })
}

// testURL creates a migrated database of the test's own on the server of
// BQ_TEST_MYSQL_DSN and returns its mysql:// URL; the database is dropped
// when the test ends. It skips when BQ_TEST_DRIVERS leaves MySQL out.
func testURL(t *testing.T) string {
	t.Helper()
	if want := os.Getenv("BQ_TEST_DRIVERS"); want != "" && !strings.Contains(want, "mysql") {
		t.Skip("BQ_TEST_DRIVERS leaves out mysql")
	}
	base := os.Getenv("BQ_TEST_MYSQL_DSN")
	if base == "" {
		base = "mysql://root@127.0.0.1:3306/test"
	}
	ctx := context.Background()
	admin := plainDB(t, base)
	if err := admin.PingContext(ctx); err != nil {
		t.Fatalf("MySQL is selected but unreachable at %s: %v", base, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "bounds_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE "+name); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	d := New(plainDB(t, u.String()))
	p, err := migrations.NewProvider(d.DB(), "mysql", migrations.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	return u.String()
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

// lockInTx commits key's semaphore, then begins a bq transaction that
// locks its row.
func lockInTx(t *testing.T, d *engine, key string) driver.Tx {
	t.Helper()
	ctx := context.Background()
	l := driver.Limit{Key: key, To: 1, Duration: time.Minute}
	if err := driver.InTx(ctx, d, func(ex driver.Executor) error { return ex.SemaphoreEnsure(ctx, l, time.Now()) }); err != nil {
		t.Fatal(err)
	}
	tx, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, ok, err := tx.SemaphoreLock(ctx, key, ""); err != nil || !ok {
		t.Fatalf("lock semaphore %q: ok %v, %v", key, ok, err)
	}
	return tx
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
	ctx := context.Background()
	tx := lockInTx(t, d, "g/frozen")
	if !rowLocked(t, other, "g/frozen") {
		t.Fatal("the bq transaction does not hold the semaphore row: the test proves nothing")
	}
	time.Sleep(frozen) // the client freezes
	if _, _, err := tx.SemaphoreLock(ctx, "g/frozen", ""); err == nil {
		t.Fatalf("a bq transaction silent for %s past a bound of %s still runs statements", frozen, testBound)
	} else {
		t.Logf("after the freeze: %v", err)
	}
	_ = tx.Rollback(ctx)
	if rowLocked(t, other, "g/frozen") {
		t.Fatal("the frozen transaction's row lock is still held")
	}
	for range 5 {
		if _, err := d.Exec().CountByQueue(ctx); err != nil {
			t.Fatalf("the pool after a server-ended session: %v", err)
		}
	}
}

// A bq transaction on the pool Open made is ended by the server once its
// client stays silent past the bound.
func TestFrozenTxEndsOpen(t *testing.T) {
	shortBound(t)
	ctx := context.Background()
	u := testURL(t)
	d, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
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
	checkFrozenTxEnds(t, d.e, plainDB(t, u))
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
	checkFrozenTxEnds(t, New(db).e, plainDB(t, u))
}

// A bq statement waiting for a row lock gives up within the bound, as a
// retryable lock wait timeout, not after InnoDB's default 50 s.
func TestLockWaitBounded(t *testing.T) {
	shortBound(t)
	ctx := context.Background()
	u := testURL(t)
	d, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	holder := lockInTx(t, New(plainDB(t, u)).e, "g/held") // an unbounded session holds the row
	defer holder.Rollback(ctx)

	tx, err := d.e.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err = tx.SemaphoreLock(waitCtx, "g/held", "")
	waited := time.Since(start)
	if err == nil || !d.e.Retryable(err) {
		t.Fatalf("lock a held row: %v after %s, want a retryable lock wait timeout", err, waited)
	}
	if waited > 10*testBound {
		t.Errorf("waited %s for a held row, want about %s", waited, testBound)
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
