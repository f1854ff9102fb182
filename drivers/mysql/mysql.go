// Package mysql runs bq on MySQL 8.0+ and MariaDB 10.6+ through
// github.com/go-sql-driver/mysql.
//
//	client, _ := bq.Open(ctx, "mysql://app:secret@db:3306/app")
//
// or, on a *sql.DB of your own (open it with DSN for bq's settings):
//
//	dsn, _ := mysql.DSN("mysql://app:secret@db:3306/app")
//	db, _ := sql.Open("mysql", dsn)
//	client, _ := bq.NewClient(mysql.New(db), bq.Config{})
//
// Every transaction bq owns runs at READ COMMITTED, so InnoDB takes no gap
// locks; claiming and the dispatcher's locking reads use FOR UPDATE SKIP
// LOCKED; deadlocks (1213) and lock wait timeouts (1205) are retried.
// Times are stored as Unix microseconds, so no time zone setting matters.
// The columns hold concurrency keys of up to MaxKeyBytes; bq itself takes
// keys of up to bq.MaxKeyBytes, on every database alike.
package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/migrations"
)

// Driver is bq's MySQL/MariaDB driver.
type Driver struct {
	db     *sql.DB
	owned  bool // opened by Open, closed by Close
	prefix string
	q      *queries
}

// ParseURL turns a mysql:// URL into a go-sql-driver configuration:
//
//	mysql://user:pass@host:3306/db?param=value&...
//
// Query parameters are go-sql-driver's DSN parameters and session
// variables, passed on as they are. Unless the URL sets them, bq adds
// parseTime=true, loc=UTC, time_zone='+00:00' (times are stored as Unix
// microseconds, so these only keep ad-hoc date functions honest) and
// interpolateParams=true (one round trip per statement instead of three).
func ParseURL(rawURL string) (*gomysql.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse MySQL DSN: %v (expected mysql://user:pass@host:3306/db)", redactErr(err))
	}
	if u.Scheme != "mysql" {
		return nil, fmt.Errorf("parse MySQL DSN: scheme %q, want mysql:// (mysql://user:pass@host:3306/db)", u.Scheme)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, fmt.Errorf("parse MySQL DSN %s: name one database, as in mysql://user:pass@host:3306/db", u.Redacted())
	}
	// go-sql-driver parses its own parameters (timeout, tls, ...) and
	// keeps the rest as session variables.
	cfg, err := gomysql.ParseDSN("/?" + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("parse MySQL DSN %s: %w", u.Redacted(), err)
	}
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if u.Port() == "" {
		cfg.Addr = u.Host + ":3306"
	}
	if u.Hostname() == "" {
		cfg.Addr = "127.0.0.1" + strings.TrimPrefix(cfg.Addr, u.Host)
	}
	cfg.DBName = db
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	q := u.Query()
	if !q.Has("parseTime") {
		cfg.ParseTime = true
	}
	if !q.Has("loc") {
		cfg.Loc = time.UTC
	}
	if !q.Has("interpolateParams") {
		cfg.InterpolateParams = true
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["time_zone"]; !ok {
		cfg.Params["time_zone"] = "'+00:00'"
	}
	return cfg, nil
}

// DSN returns the go-sql-driver data source name for a mysql:// URL, with
// the settings ParseURL adds. Use it to open a *sql.DB of your own for New.
func DSN(rawURL string) (string, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return "", err
	}
	return cfg.FormatDSN(), nil
}

// redactErr keeps the URL, and with it any password, out of a url.Parse
// error.
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Open connects to a mysql:// URL (see ParseURL) and checks that the server
// is MySQL 8.0+ or MariaDB 10.6+. The pool's sessions default to READ
// COMMITTED, like bq's own transactions, so a transaction begun on DB()
// for EnqueueTx takes no gap locks either.
func Open(ctx context.Context, rawURL string) (*Driver, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	db, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	version, err := serverVersion(ctx, db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to MySQL at %s: %w (is the server running and the DSN right?)", cfg.Addr, err)
	}
	v, err := checkVersion(version)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("MySQL at %s: %w", cfg.Addr, err)
	}
	// The session variable naming the default isolation depends on the
	// server; set it unless the URL did, on a pool made for that.
	_, setTx := cfg.Params["transaction_isolation"]
	_, setTxOld := cfg.Params["tx_isolation"]
	if !setTx && !setTxOld {
		db.Close()
		cfg.Params[v.isolationVariable()] = "'READ-COMMITTED'"
		if db, err = connect(ctx, cfg); err != nil {
			return nil, err
		}
	}
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return newDriver(db, true, migrations.DefaultPrefix), nil
}

func connect(ctx context.Context, cfg *gomysql.Config) (*sql.DB, error) {
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open MySQL pool: %w", err)
	}
	db := sql.OpenDB(conn)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to MySQL at %s: %w (is the server running and the DSN right?)", cfg.Addr, err)
	}
	return db, nil
}

func serverVersion(ctx context.Context, db *sql.DB) (string, error) {
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return "", fmt.Errorf("read server version: %w", err)
	}
	return version, nil
}

// serverKind is a server's family and version.
type serverKind struct {
	mariaDB      bool
	major, minor int
}

func (s serverKind) atLeast(major, minor int) bool {
	return s.major > major || s.major == major && s.minor >= minor
}

// isolationVariable names the session variable holding the default
// isolation: MySQL dropped tx_isolation in 8.0, MariaDB added
// transaction_isolation only in 11.1.
func (s serverKind) isolationVariable() string {
	if s.mariaDB && !s.atLeast(11, 1) {
		return "tx_isolation"
	}
	return "transaction_isolation"
}

var versionPattern = regexp.MustCompile(`^(\d+)\.(\d+)`)

// checkVersion parses SELECT VERSION() ("8.0.36", "10.11.6-MariaDB-1")
// and refuses servers older than bq needs: MySQL 8.0 (SKIP LOCKED,
// descending indexes, a persistent AUTO_INCREMENT counter) and MariaDB
// 10.6 (SKIP LOCKED).
func checkVersion(version string) (serverKind, error) {
	var s serverKind
	// MariaDB's handshake once prefixed "5.5.5-" for old clients.
	m := versionPattern.FindStringSubmatch(strings.TrimPrefix(version, "5.5.5-"))
	if m == nil {
		return s, fmt.Errorf("cannot read the server version %q: bq needs MySQL 8.0+ or MariaDB 10.6+", version)
	}
	s.major, _ = strconv.Atoi(m[1])
	s.minor, _ = strconv.Atoi(m[2])
	s.mariaDB = strings.Contains(strings.ToLower(version), "mariadb")
	switch {
	case s.mariaDB && !s.atLeast(10, 6):
		return s, fmt.Errorf("the server runs MariaDB %s; bq needs MariaDB 10.6 or newer (FOR UPDATE SKIP LOCKED): upgrade the server", version)
	case !s.mariaDB && !s.atLeast(8, 0):
		return s, fmt.Errorf("the server runs MySQL %s; bq needs MySQL 8.0 or newer (FOR UPDATE SKIP LOCKED): upgrade the server", version)
	}
	return s, nil
}

// New wraps an existing *sql.DB opened with go-sql-driver/mysql (see DSN);
// it stays the caller's to close. New does not query the server: Open
// checks its version, New trusts the caller to run MySQL 8.0+ or MariaDB
// 10.6+. bq's writes run in READ COMMITTED transactions whatever the
// pool's default isolation.
func New(db *sql.DB) *Driver {
	return newDriver(db, false, migrations.DefaultPrefix)
}

func newDriver(db *sql.DB, owned bool, prefix string) *Driver {
	return &Driver{db: db, owned: owned, prefix: prefix, q: newQueries(prefix)}
}

// DB returns the underlying *sql.DB.
func (d *Driver) DB() *sql.DB { return d.db }

func (d *Driver) Dialect() driver.Dialect { return driver.MySQL }
func (d *Driver) Prefix() string          { return d.prefix }

func (d *Driver) WithPrefix(prefix string) driver.Driver {
	return &Driver{db: d.db, owned: d.owned, prefix: prefix, q: newQueries(prefix)}
}

// Exec returns an executor whose writes each run in a READ COMMITTED
// transaction of their own.
func (d *Driver) Exec() driver.Executor { return &executor{d: d, db: d.db, q: d.q} }

// Begin starts a READ COMMITTED transaction: InnoDB then locks the rows a
// statement changes, not the gaps between them, so enqueues of new keys
// and claims do not deadlock on each other's gap locks.
func (d *Driver) Begin(ctx context.Context) (driver.Tx, error) {
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	return &txExecutor{executor: executor{d: d, db: tx, q: d.q, inTx: true}, tx: tx}, nil
}

// WrapTx adapts the caller's *sql.Tx. bq writes inside it at whatever
// isolation it was begun with; READ COMMITTED is what bq uses itself, and
// a deadlock met in it comes back as bq.ErrConflict.
func (d *Driver) WrapTx(tx any) (driver.Executor, error) {
	t, ok := tx.(*sql.Tx)
	if !ok {
		return nil, fmt.Errorf("the MySQL driver enqueues inside a *sql.Tx, got %T: begin the transaction on the same *sql.DB", tx)
	}
	return &executor{d: d, db: t, q: d.q, inTx: true}, nil
}

// Server error numbers worth running a transaction again for.
const (
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK
	errRecordChanged   = 1020 // ER_CHECKREAD: MariaDB's snapshot isolation conflict
)

// Retryable reports deadlocks and lock wait timeouts (and MariaDB's
// "record has changed since last read" under snapshot isolation).
func (d *Driver) Retryable(err error) bool {
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case errDeadlock, errLockWaitTimeout, errRecordChanged:
			return true
		}
	}
	return false
}

func (d *Driver) SQLDB() *sql.DB { return d.db }

func (d *Driver) Close() error {
	if d.owned {
		return d.db.Close()
	}
	return nil
}

type txExecutor struct {
	executor
	tx *sql.Tx
}

func (t *txExecutor) Commit(ctx context.Context) error   { return t.tx.Commit() }
func (t *txExecutor) Rollback(ctx context.Context) error { return t.tx.Rollback() }
