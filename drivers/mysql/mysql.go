// Package mysql runs bq on MySQL 8.0+ and MariaDB 10.6+ through
// github.com/go-sql-driver/mysql.
//
//	import _ "github.com/bqueue/bq/drivers/mysql"
//
//	client, _ := bq.Open(ctx, "mysql://app:secret@db:3306/app", bq.Config{})
//
// or, on a *sql.DB of your own (open it with Connector for bq's settings
// and its check of each session's character set):
//
//	conn, _ := mysql.Connector("mysql://app:secret@db:3306/app")
//	db := sql.OpenDB(conn)
//	db.SetConnMaxIdleTime(mysql.ConnMaxIdleTime)
//	client, _ := bq.NewClient(mysql.New(db), bq.Config{})
//
// Every transaction bq owns runs at READ COMMITTED, so InnoDB takes no gap
// locks; claiming and the dispatcher's locking reads use FOR UPDATE SKIP
// LOCKED; deadlocks (1213) and lock wait timeouts (1205) are retried.
// Times are stored as Unix microseconds, so no time zone setting matters.
// The columns hold concurrency keys of up to MaxKeyBytes; bq itself takes
// keys of up to bq.MaxKeyBytes, on every database alike.
//
// # Session bounds
//
// A client frozen or gone inside a transaction (SIGSTOP, a frozen VM, a
// cut network) would hold its row locks until wait_timeout ends its
// session: 8 hours by default. The sessions of a pool made by Open or
// opened from DSN therefore carry, unless the URL sets them itself:
//
//   - innodb_lock_wait_timeout = TxIdleTimeout (10 s, InnoDB's default
//     is 50 s): a statement waiting behind a frozen holder fails with 1205
//     and bq runs its transaction again;
//   - on MariaDB (Open), idle_transaction_timeout = TxIdleTimeout: the
//     server ends a session idle that long inside a transaction, rolling
//     it back;
//   - on MySQL 8, which has no idle-transaction timeout, and from DSN,
//     which cannot know the server, wait_timeout = TxIdleTimeout: the
//     server ends any session idle that long, in a transaction or not. So
//     that the pool never hands out a connection the server has closed,
//     Open's pool closes connections idle for a third of the session's
//     wait_timeout (ConnMaxIdleTime); give a pool opened from DSN
//     SetConnMaxIdleTime(mysql.ConnMaxIdleTime) too.
//
// bq runs no user code inside its transactions, so only a frozen or
// vanished client meets these bounds; a transaction you begin yourself on
// such a pool (EnqueueTx) meets them too, so do not leave it idle for
// TxIdleTimeout. New leaves the sessions of a pool opened otherwise as
// they are.
//
// # Character sets
//
// Parameters are interpolated into the statement on the client
// (interpolateParams=true, one round trip instead of three), which is safe
// only where an escaping backslash cannot become part of a character. A
// URL naming no character set gets utf8mb4 (charset=utf8mb4,
// collation=utf8mb4_general_ci, set again after the handshake); one whose
// charset, collation or character_set_client is big5, cp932, gb18030, gbk
// or sjis (or any set not known to be safe) is refused by ParseURL, DSN
// and Open unless it turns interpolation off with interpolateParams=false;
// parameter names are compared ignoring case, as the server does. Since a
// session's character set can also come from the server (its default,
// when it ignores the client's handshake, or init_connect), every
// connection of a pool made by Open or Connector reads its own
// @@session.character_set_client after connecting and is refused unless
// it is safe. A pool opened from DSN with sql.Open is not checked so:
// prefer Connector.
// Go's strings are UTF-8 and bq stores keys as bytes, so utf8mb4 loses
// nothing.
package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/humanize"
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/migrations"
)

// engine is bq's MySQL/MariaDB driver as the engine sees it; users hold
// it sealed in a Driver.
type engine struct {
	db     *sql.DB
	owned  bool // opened by Open, closed by Close
	prefix string
	srv    serverCaps
	dl     *dialect
}

// serverCaps is what Open learned of the server and of the sessions it set
// up; New learns nothing, and takes the paths every server supports.
type serverCaps struct {
	// returning: INSERT and DELETE take RETURNING (MariaDB 10.5+; MySQL 8
	// has none).
	returning bool
	// readCommitted: every session of the pool defaults to READ
	// COMMITTED (Open set it), so a transaction need not set it first.
	readCommitted bool
}

// TxIdleTimeout bounds bq's sessions (see the package documentation): a
// transaction whose client stays silent this long is rolled back by the
// server, and a lock wait gives up after it.
const TxIdleTimeout = driver.TxIdleTimeout

// ConnMaxIdleTime is how long a pool should keep an idle connection whose
// session has wait_timeout = TxIdleTimeout, so that the server never
// closes one the pool still holds: a third of it, as database/sql closes
// idle connections up to a second late.
const ConnMaxIdleTime = TxIdleTimeout / 3

// portableOnly makes Open take the paths every server has (MySQL 8's)
// on MariaDB too; tests set it.
var portableOnly bool

// txIdleTimeout is TxIdleTimeout; tests shorten it.
var txIdleTimeout = TxIdleTimeout

// seconds renders d for a session variable counted in whole seconds,
// rounding up.
func seconds(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}

// setBounds adds bq's session bounds to params, keeping those the URL
// set: innodb_lock_wait_timeout everywhere; idle_transaction_timeout on
// MariaDB; wait_timeout on MySQL, which has no idle-transaction timeout,
// or when the server is not known (s == nil: DSN).
func setBounds(params map[string]string, s *serverKind) {
	n := seconds(txIdleTimeout)
	if _, ok := params["innodb_lock_wait_timeout"]; !ok {
		params["innodb_lock_wait_timeout"] = n
	}
	_, idleTx := params["idle_transaction_timeout"]
	_, idleWrite := params["idle_write_transaction_timeout"]
	_, wait := params["wait_timeout"]
	switch {
	case idleTx || idleWrite:
		// The URL chose its idle-transaction bound.
	case s != nil && s.mariaDB:
		params["idle_transaction_timeout"] = n
	case !wait:
		params["wait_timeout"] = n
	}
}

// connMaxIdleTime is how long a pool keeps an idle connection whose
// session ends after wait idle seconds.
func connMaxIdleTime(wait time.Duration) time.Duration {
	return min(5*time.Minute, wait/3)
}

// ParseURL turns a mysql:// URL into a go-sql-driver configuration:
//
//	mysql://user:pass@host:3306/db?param=value&...
//
// Query parameters are go-sql-driver's DSN parameters and session
// variables, passed on as they are. Unless the URL sets them, bq adds
// parseTime=true, loc=UTC, time_zone='+00:00' (times are stored as Unix
// microseconds, so these only keep ad-hoc date functions honest),
// interpolateParams=true (one round trip per statement instead of three),
// charset=utf8mb4 with collation=utf8mb4_general_ci, and the session
// bounds innodb_lock_wait_timeout and wait_timeout (see the package
// documentation; Open picks the right ones for the server).
//
// With interpolation on, a character set in which a backslash byte can
// end a multibyte character (big5, cp932, gb18030, gbk, sjis: escaping
// would let a parameter out of its string literal) is refused, whether
// named by charset, collation or character_set_client; use utf8mb4, or
// interpolateParams=false to keep such a set.
func ParseURL(rawURL string) (*gomysql.Config, error) {
	cfg, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	setBounds(cfg.Params, nil)
	return cfg, nil
}

// parseURL is ParseURL without the session bounds, which depend on the
// server.
func parseURL(rawURL string) (*gomysql.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse MySQL DSN: %v (expected mysql://user:pass@host:3306/db)", redactErr(err))
	}
	if u.Scheme != "mysql" {
		return nil, fmt.Errorf("parse MySQL DSN: scheme %q, want mysql:// (mysql://user:pass@host:3306/db)", u.Scheme)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, fmt.Errorf("parse MySQL DSN %s: name one database, as in mysql://user:pass@host:3306/db", humanize.RedactDSN(rawURL))
	}
	if err := checkCharset(u.Query()); err != nil {
		return nil, fmt.Errorf("parse MySQL DSN %s: %w", humanize.RedactDSN(rawURL), err)
	}
	// go-sql-driver sends a parameter it does not know as a session SET:
	// ?password=x (or ?PASSWORD=x: the server ignores the case) would be
	// `SET password = x`, changing the account's password rather than
	// giving it.
	for name := range u.Query() {
		if n := strings.ToLower(name); n == "password" || n == "passwd" {
			return nil, fmt.Errorf("parse MySQL DSN %s: a password belongs in the URL's user part (mysql://user:pass@host:3306/db), not in ?%s=, which the server would take as SET password",
				humanize.RedactDSN(rawURL), name)
		}
	}
	// go-sql-driver parses its own parameters (timeout, tls, ...) and
	// keeps the rest as session variables, whose names bq lowercases.
	cfg, err := gomysql.ParseDSN("/?" + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("parse MySQL DSN %s: %w", humanize.RedactDSN(rawURL), err)
	}
	if cfg.Params, err = sessionVariables(cfg.Params); err != nil {
		return nil, fmt.Errorf("parse MySQL DSN %s: %w", humanize.RedactDSN(rawURL), err)
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
	if err := setDefaultCharset(cfg, q); err != nil {
		return nil, fmt.Errorf("parse MySQL DSN %s: %w", humanize.RedactDSN(rawURL), err)
	}
	return cfg, nil
}

// DSN returns the go-sql-driver data source name for a mysql:// URL, with
// the settings ParseURL adds, for a *sql.DB of your own for New; give
// that pool SetConnMaxIdleTime(ConnMaxIdleTime): its sessions carry
// wait_timeout = TxIdleTimeout unless the URL sets it. A pool opened from
// it does not check each session's character set as Connector's does:
// prefer Connector.
func DSN(rawURL string) (string, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return "", err
	}
	return cfg.FormatDSN(), nil
}

// Connector returns a connector for a mysql:// URL (see ParseURL) for a
// *sql.DB of your own, sql.OpenDB(connector), to give New. Prefer it to
// DSN: with parameter interpolation on, each connection it makes reads
// its session's character set and is refused unless it is safe, whatever
// set it (the URL, init_connect, or a server default that ignores the
// client's handshake). Give the pool SetConnMaxIdleTime(ConnMaxIdleTime)
// as with DSN.
func Connector(rawURL string) (sqldriver.Connector, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return newConnector(cfg)
}

// newConnector is go-sql-driver's connector for cfg, each of whose
// connections is checked (checkedConnector) when cfg interpolates.
func newConnector(cfg *gomysql.Config) (sqldriver.Connector, error) {
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open MySQL pool: %w", err)
	}
	if !cfg.InterpolateParams {
		return conn, nil
	}
	return checkedConnector{conn}, nil
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
// for EnqueueTx takes no gap locks either, and carry the session bounds
// of the server's kind (see the package documentation). bq's own
// transactions then take the session's isolation rather than set it
// each time: do not change a session's default isolation on DB().
func Open(ctx context.Context, rawURL string) (*Driver, error) {
	cfg, err := parseURL(rawURL)
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
	// The session variables naming the default isolation and bounding
	// idle transactions depend on the server: the pool is made again with
	// them, keeping those the URL set.
	db.Close()
	_, setTx := cfg.Params["transaction_isolation"]
	_, setTxOld := cfg.Params["tx_isolation"]
	if !setTx && !setTxOld {
		cfg.Params[v.isolationVariable()] = "'READ-COMMITTED'"
	}
	setBounds(cfg.Params, &v)
	if db, err = connect(ctx, cfg); err != nil {
		return nil, err
	}
	// Close idle connections before the server's wait_timeout does, so
	// the pool never hands out one the server has closed.
	var wait int64
	if err := db.QueryRowContext(ctx, "SELECT @@SESSION.wait_timeout").Scan(&wait); err != nil {
		db.Close()
		return nil, fmt.Errorf("MySQL at %s: read wait_timeout: %w", cfg.Addr, err)
	}
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(connMaxIdleTime(time.Duration(wait) * time.Second))
	srv := serverCaps{returning: v.mariaDB && !portableOnly, readCommitted: !setTx && !setTxOld}
	return seal(newDriver(db, true, migrations.DefaultPrefix, srv)), nil
}

func connect(ctx context.Context, cfg *gomysql.Config) (*sql.DB, error) {
	conn, err := newConnector(cfg)
	if err != nil {
		return nil, err
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
// pool's default isolation. The sessions are bounded only if the pool was
// opened from DSN (see the package documentation).
func New(db *sql.DB) *Driver {
	return seal(newDriver(db, false, migrations.DefaultPrefix, serverCaps{}))
}

func newDriver(db *sql.DB, owned bool, prefix string, srv serverCaps) *engine {
	return &engine{db: db, owned: owned, prefix: prefix, srv: srv, dl: newDialect(prefix, srv)}
}

// DB returns the underlying *sql.DB.
func (d *engine) DB() *sql.DB { return d.db }

func (d *engine) Dialect() driver.Dialect { return driver.MySQL }
func (d *engine) Prefix() string          { return d.prefix }

func (d *engine) WithPrefix(prefix string) driver.Driver {
	return newDriver(d.db, d.owned, prefix, d.srv)
}

// Exec returns an executor whose writes each run in a READ COMMITTED
// transaction of their own.
func (d *engine) Exec() driver.Executor { return executor{sqlexec.New(d.dl, d, d.db), d} }

// Begin starts a READ COMMITTED transaction: InnoDB then locks the rows a
// statement changes, not the gaps between them, so enqueues of new keys
// and claims do not deadlock on each other's gap locks.
//
// A pool whose sessions Open set to READ COMMITTED begins with START
// TRANSACTION alone; any other sets the isolation first, one more round
// trip per transaction.
func (d *engine) Begin(ctx context.Context) (driver.Tx, error) {
	opts := &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	if d.srv.readCommitted {
		opts = nil
	}
	tx, err := d.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	t := sqlexec.Begun(d.dl, d, tx, tx, nil)
	return txExecutor{executor{t.Executor, d}, sqlexec.Ending{Tx: t}}, nil
}

// WrapTx adapts the caller's *sql.Tx. bq writes inside it at whatever
// isolation it was begun with; READ COMMITTED is what bq uses itself, and
// a deadlock met in it comes back as bq.ErrConflict.
func (d *engine) WrapTx(tx any) (driver.Executor, error) {
	t, ok := tx.(*sql.Tx)
	if !ok {
		return nil, fmt.Errorf("the MySQL driver enqueues inside a *sql.Tx, got %T: begin the transaction on the same *sql.DB", tx)
	}
	return executor{sqlexec.Wrap(d.dl, d, t), d}, nil
}

// Server error numbers worth running a transaction again for.
const (
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	errDeadlock        = 1213 // ER_LOCK_DEADLOCK
	errRecordChanged   = 1020 // ER_CHECKREAD: MariaDB's snapshot isolation conflict
)

// Retryable reports deadlocks and lock wait timeouts (and MariaDB's
// "record has changed since last read" under snapshot isolation).
func (d *engine) Retryable(err error) bool {
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case errDeadlock, errLockWaitTimeout, errRecordChanged:
			return true
		}
	}
	return false
}

func (d *engine) SQLDB() *sql.DB { return d.db }

func (d *engine) Close() error {
	if d.owned {
		return d.db.Close()
	}
	return nil
}
