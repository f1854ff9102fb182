// Package testdb gives bq's tests a fresh, empty database of each kind bq
// runs on: a SQLite file in the test's temporary directory, a PostgreSQL
// schema or a MySQL/MariaDB database of the test's own on the servers the
// environment names, dropped when the test ends.
//
// BQ_TEST_DRIVERS (comma list; default: all) selects the kinds. A
// selected server that is unreachable fails the test, never skips it: a
// run that meant to cover a database must not pass without it.
// BQ_TEST_POSTGRES_DSN and BQ_TEST_MYSQL_DSN name the servers (defaults:
// the local ones `make test` starts).
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The kinds of database, as BQ_TEST_DRIVERS names them.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
	MySQL    = "mysql"
)

// All is every kind, in the order the suites run them.
var All = []string{SQLite, Postgres, MySQL}

// PostgresBaseDSN is the server fresh PostgreSQL schemas are made on.
func PostgresBaseDSN() string {
	if dsn := os.Getenv("BQ_TEST_POSTGRES_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// MySQLBaseDSN is the server fresh MySQL databases are made on, as a
// mysql:// URL.
func MySQLBaseDSN() string {
	if dsn := os.Getenv("BQ_TEST_MYSQL_DSN"); dsn != "" {
		return dsn
	}
	return "mysql://root@127.0.0.1:3306/test"
}

// Selected returns the kinds BQ_TEST_DRIVERS names, default all; a name
// it does not know fails the test.
func Selected(t testing.TB) []string {
	t.Helper()
	want := os.Getenv("BQ_TEST_DRIVERS")
	if want == "" {
		return All
	}
	var out []string
	for name := range strings.SplitSeq(want, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(All, name) {
			t.Fatalf("BQ_TEST_DRIVERS names %q, which the tests do not know (known: %s)", name, strings.Join(All, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// Require skips t when BQ_TEST_DRIVERS leaves kind out: the run chose
// not to cover it. Whether it is reachable is Fresh's to check.
func Require(t testing.TB, kind string) {
	t.Helper()
	if !slices.Contains(Selected(t), kind) {
		t.Skipf("BQ_TEST_DRIVERS leaves out %s", kind)
	}
}

// Fresh returns bq's DSN (sqlite://, postgres://, mysql://) of a new,
// empty database of kind, dropped when the test ends.
func Fresh(t testing.TB, kind string) string {
	t.Helper()
	switch kind {
	case SQLite:
		return "sqlite://" + SQLitePath(t)
	case Postgres:
		return FreshPostgres(t)
	case MySQL:
		return FreshMySQL(t)
	}
	t.Fatalf("no fresh database of kind %q (known: %s)", kind, strings.Join(All, ", "))
	return ""
}

// SQLitePath is the path of a database file not yet created, in the
// test's temporary directory.
func SQLitePath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "bq.db")
}

var pgAdmin = sync.OnceValues(func() (*pgxpool.Pool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, PostgresBaseDSN())
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
})

// FreshPostgres creates a schema of the test's own and returns a DSN whose
// search_path points at it; the schema is dropped when the test ends.
func FreshPostgres(t testing.TB) string {
	t.Helper()
	admin, err := pgAdmin()
	if err != nil {
		t.Fatalf("PostgreSQL is selected (BQ_TEST_DRIVERS) but unreachable at %s: %v", redacted(PostgresBaseDSN()), err)
	}
	schema := "t_" + randomHex(6)
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	sep := "?"
	if strings.Contains(PostgresBaseDSN(), "?") {
		sep = "&"
	}
	return PostgresBaseDSN() + sep + "search_path=" + schema
}

// mysqlConfig is the go-sql-driver configuration of a mysql:// URL: the
// server and credentials only, enough for the admin connection.
func mysqlConfig(u *url.URL) *gomysql.Config {
	cfg := gomysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr = "tcp", u.Host
	if u.Port() == "" {
		cfg.Addr = u.Host + ":3306"
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	return cfg
}

var myAdmin = sync.OnceValues(func() (*sql.DB, error) {
	u, err := url.Parse(MySQLBaseDSN())
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("mysql", mysqlConfig(u).FormatDSN())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
})

// FreshMySQL creates a database of the test's own on the server of
// BQ_TEST_MYSQL_DSN and returns its mysql:// URL; the database is dropped
// when the test ends.
func FreshMySQL(t testing.TB) string {
	t.Helper()
	base, err := url.Parse(MySQLBaseDSN())
	if err != nil {
		t.Fatalf("BQ_TEST_MYSQL_DSN: %v", err)
	}
	admin, err := myAdmin()
	if err != nil {
		t.Fatalf("MySQL is selected (BQ_TEST_DRIVERS) but unreachable at %s: %v", base.Redacted(), err)
	}
	name := "t_" + randomHex(6)
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE "+name); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	base.Path = "/" + name
	return base.String()
}

// redacted hides a URL's password.
func redacted(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Redacted()
	}
	return "(an unparsable DSN)"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
