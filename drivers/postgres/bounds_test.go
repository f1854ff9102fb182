package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/drivertest"
)

// shortBound lowers the bound for one test; set it before Open or New.
func shortBound(t *testing.T) {
	old := txIdleTimeout
	txIdleTimeout = drivertest.TestBound
	t.Cleanup(func() { txIdleTimeout = old })
}

// txSettings reads the timeouts in force in a bq transaction.
func txSettings(t *testing.T, tx driver.Tx) (idle, statement, lock string) {
	t.Helper()
	err := tx.(*txExecutor).tx.QueryRow(context.Background(),
		"SELECT current_setting('idle_in_transaction_session_timeout'), current_setting('statement_timeout'), current_setting('lock_timeout')").
		Scan(&idle, &statement, &lock)
	if err != nil {
		t.Fatal(err)
	}
	return idle, statement, lock
}

// rowLocked reports whether another session holds key's semaphore row.
func rowLocked(t *testing.T, other *pgx.Conn, key string) bool {
	t.Helper()
	ctx := context.Background()
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, "SELECT 1 FROM bq_semaphores WHERE key = $1 FOR UPDATE NOWAIT", key)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}

// checkFrozenTxEnds freezes a bq transaction holding a row lock past the
// bound and checks the server ended it: the next statement fails, the lock
// is free, and the pool goes on with fresh connections.
func checkFrozenTxEnds(t *testing.T, d *engine, other *pgx.Conn) {
	t.Helper()
	tx := drivertest.LockInTx(t, d, "g/frozen")
	if idle, statement, lock := txSettings(t, tx); idle != "1s" || statement != "0" || lock != "0" {
		t.Errorf("in a bq transaction: idle_in_transaction_session_timeout %s, statement_timeout %s, lock_timeout %s; want 1s, 0, 0",
			idle, statement, lock)
	}
	drivertest.CheckFrozenTxEnds(t, d, tx, "g/frozen", drivertest.Frozen, func(key string) bool { return rowLocked(t, other, key) })
}

// A bq transaction on the pool Open made is ended by the server once its
// client stays silent past the bound (the session carries it).
func TestFrozenTxEndsOpen(t *testing.T) {
	shortBound(t)
	dsn := testDSN(t)
	d, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() }) // after lockInTx's rollback
	other, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	checkFrozenTxEnds(t, d.e(), other)
}

// On a pool of the application's own, bq bounds its own transactions
// (SET LOCAL) and nothing else: a transaction the application begins on
// the same connection afterwards may idle as long as it likes.
func TestFrozenTxEndsUserPool(t *testing.T) {
	shortBound(t)
	ctx := context.Background()
	dsn := testDSN(t)
	pool, err := pgxpool.New(ctx, dsn+"&pool_max_conns=1") // one connection: bq's and the user's
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after lockInTx's rollback
	d := New(pool)
	other, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)

	tx := drivertest.LockInTx(t, d.e(), "g/done") // a bq transaction that ends well
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	utx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var idle string
	if err := utx.QueryRow(ctx, "SELECT current_setting('idle_in_transaction_session_timeout')").Scan(&idle); err != nil {
		t.Fatal(err)
	}
	if idle != "0" {
		t.Errorf("the user's transaction after a bq one: idle_in_transaction_session_timeout %s, want 0 (SET LOCAL leaked)", idle)
	}
	time.Sleep(drivertest.Frozen)
	if _, err := utx.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("the user's transaction after %s idle: %v; bq must not bound it", drivertest.Frozen, err)
	}
	if err := utx.Commit(ctx); err != nil {
		t.Fatalf("commit the user's transaction: %v", err)
	}

	checkFrozenTxEnds(t, d.e(), other)
}

// The DSN's own setting wins over bq's.
func TestOpenKeepsDSNIdleTimeout(t *testing.T) {
	shortBound(t)
	ctx := context.Background()
	d, err := Open(ctx, testDSN(t)+"&idle_in_transaction_session_timeout=1min")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	tx := drivertest.LockInTx(t, d.e(), "g/k")
	if idle, _, _ := txSettings(t, tx); idle != "1min" {
		t.Errorf("idle_in_transaction_session_timeout %s, want the DSN's 1min", idle)
	}
}

func TestSetsIdleTimeout(t *testing.T) {
	wantPredicate(t, "setsIdleTimeout", func(params string) bool {
		m := map[string]string{}
		if k, v, ok := strings.Cut(params, "="); ok {
			m[k] = v
		} else if params != "" {
			m[params] = "1s"
		}
		return setsIdleTimeout(m)
	}, map[string]bool{
		"":                                    false,
		"idle_in_transaction_session_timeout": true,
		"options=-c idle_in_transaction_session_timeout=5s": true,
		"options=-c statement_timeout=5s":                   false,
	})
}

// wantPredicate checks f against each input's expected answer.
func wantPredicate(t *testing.T, name string, f func(string) bool, cases map[string]bool) {
	t.Helper()
	for in, want := range cases {
		if got := f(in); got != want {
			t.Errorf("%s(%q) = %v, want %v", name, in, got, want)
		}
	}
}
