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
	"errors"
	"fmt"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/bqueue/bq/internal/driver"
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
	byRule driver.RuleQueues // the queues claimed by the rule's transaction (claims.go)
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

// portableOnly makes Open take the paths every server has (MySQL 8's)
// on MariaDB too; tests set it.
var portableOnly bool

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
	return &Driver{driver.Seal(newDriver(db, true, migrations.DefaultPrefix, srv))}, nil
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

// New wraps an existing *sql.DB opened with go-sql-driver/mysql (see DSN);
// it stays the caller's to close. New does not query the server: Open
// checks its version, New trusts the caller to run MySQL 8.0+ or MariaDB
// 10.6+. bq's writes run in READ COMMITTED transactions whatever the
// pool's default isolation. The sessions are bounded only if the pool was
// opened from DSN (see the package documentation).
func New(db *sql.DB) *Driver {
	return &Driver{driver.Seal(newDriver(db, false, migrations.DefaultPrefix, serverCaps{}))}
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
	return sqlexec.WrapUser(d.dl, d, "MySQL", tx, func(x *sqlexec.Executor) driver.Executor { return executor{x, d} })
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

// Refusal reports MySQL's and MariaDB's read-only errors (the server's
// read_only, a read-only transaction, innodb_read_only) and full ones
// (the disk, a table's space).
func (d *engine) Refusal(err error) driver.Refusal {
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1290, 1792, 1836: // ER_OPTION_PREVENTS_STATEMENT (--read-only), ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION, ER_READ_ONLY_MODE
			return driver.ReadOnly
		case 1021, 1114: // ER_DISK_FULL, ER_RECORD_FILE_FULL
			return driver.Full
		}
	}
	return driver.NotRefused
}

func (d *engine) SQLDB() *sql.DB { return d.db }

func (d *engine) Close() error {
	if d.owned {
		return d.db.Close()
	}
	return nil
}
