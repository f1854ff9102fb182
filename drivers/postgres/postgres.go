// Package postgres runs bq on PostgreSQL through a pgx/v5 pool.
//
//	pool, _ := pgxpool.New(ctx, "postgres://localhost/app")
//	client, _ := bq.NewClient(postgres.New(pool), bq.Config{})
//
// A client frozen or gone inside one of bq's transactions (SIGSTOP, a
// frozen VM, a cut network) would hold its row locks until the server
// noticed the dead connection, which may be never. bq's transactions are
// therefore bounded by idle_in_transaction_session_timeout =
// TxIdleTimeout (10 s): the server ends a session that sits idle inside
// one that long, rolling it back and freeing its locks. The pool Open
// makes carries it as a session default (a DSN that sets the parameter
// itself, or passes it in options, keeps its own value), so a transaction
// you begin on Pool() for EnqueueTx meets it too. On a pool of
// your own (New), bq sets it with SET LOCAL inside its own transactions
// only, in the round trip that sends BEGIN; your sessions and the
// transactions you begin (EnqueueTx) are left as they are. bq runs no
// user code inside its transactions, so only a frozen or vanished client
// ever meets the bound. No statement_timeout or lock_timeout is set:
// some of bq's statements legitimately run or wait for a while.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/humanize"
	"github.com/bqueue/bq/migrations"
)

// engine is bq's PostgreSQL driver as the engine sees it; users hold it
// sealed in a Driver.
type engine struct {
	pool   *pgxpool.Pool
	owned  bool // opened by Open, closed by Close
	prefix string
	q      *queries
	txIdle string // SET LOCAL value of bq's transactions; "" when the session carries a bound
	plans  genericPlans

	sqlOnce sync.Once
	sqlDB   *sql.DB
}

// TxIdleTimeout is the idle_in_transaction_session_timeout of bq's
// transactions: the server rolls back one whose client stays silent this
// long inside it.
const TxIdleTimeout = driver.TxIdleTimeout

// txIdleTimeout is TxIdleTimeout; tests shorten it.
var txIdleTimeout = TxIdleTimeout

const idleTimeoutParam = "idle_in_transaction_session_timeout"

// setsIdleTimeout reports whether connection parameters choose their own
// idle_in_transaction_session_timeout, directly or in options (-c).
func setsIdleTimeout(params map[string]string) bool {
	_, ok := params[idleTimeoutParam]
	return ok || strings.Contains(params["options"], idleTimeoutParam)
}

func milliseconds(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// New wraps an existing pool; the pool stays the caller's to close. bq
// bounds its own transactions on it (see the package documentation).
func New(pool *pgxpool.Pool) *Driver {
	return seal(newDriver(pool, false, migrations.DefaultPrefix))
}

// Open connects to dsn (postgres://user:pass@host:5432/db?...). Its
// sessions carry idle_in_transaction_session_timeout = TxIdleTimeout
// unless the DSN sets it.
func Open(ctx context.Context, dsn string) (*Driver, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL DSN: %w (expected postgres://user:pass@host:5432/db)", redactParseError(err))
	}
	if !setsIdleTimeout(cfg.ConnConfig.RuntimeParams) {
		cfg.ConnConfig.RuntimeParams[idleTimeoutParam] = milliseconds(txIdleTimeout)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open PostgreSQL pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL at %s:%d: %w (is the server running and the DSN right?)", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return seal(newDriver(pool, true, migrations.DefaultPrefix)), nil
}

// redactParseError puts bq's redaction of the DSN in pgx's parse error,
// whose own is best effort (it keeps ?pass=, a password holding @).
func redactParseError(err error) error {
	pe, ok := errors.AsType[*pgconn.ParseConfigError](err)
	if !ok {
		return err
	}
	redacted := *pe
	redacted.ConnString = humanize.RedactDSN(pe.ConnString)
	return &redacted
}

func newDriver(pool *pgxpool.Pool, owned bool, prefix string) *engine {
	d := &engine{pool: pool, owned: owned, prefix: prefix, q: newQueries(prefix)}
	// Open's sessions carry the bound; on the application's pool bq
	// bounds its own transactions only, unless the pool chose a value.
	if !owned && !setsIdleTimeout(pool.Config().ConnConfig.RuntimeParams) {
		d.txIdle = milliseconds(txIdleTimeout)
	}
	return d
}

// Pool returns the underlying pool.
func (d *engine) Pool() *pgxpool.Pool { return d.pool }

func (d *engine) Dialect() driver.Dialect { return driver.Postgres }
func (d *engine) Prefix() string          { return d.prefix }

func (d *engine) WithPrefix(prefix string) driver.Driver {
	return &engine{pool: d.pool, owned: d.owned, prefix: prefix, q: newQueries(prefix), txIdle: d.txIdle}
}

func (d *engine) Exec() driver.Executor {
	e := newExecutor(d.pool, d.q)
	e.txIdle, e.plans = d.txIdle, &d.plans
	return &e
}

// Begin takes a connection for a READ COMMITTED transaction; BEGIN itself
// goes out with the first statement (see pipeTx).
func (d *engine) Begin(ctx context.Context) (driver.Tx, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	tx := &pipeTx{conn: conn, idleTimeout: d.txIdle}
	return &txExecutor{executor: newExecutor(tx, d.q), tx: tx}, nil
}

// WrapTx adapts the caller's pgx.Tx; bq sets no timeout inside it.
func (d *engine) WrapTx(tx any) (driver.Executor, error) {
	t, ok := tx.(pgx.Tx)
	if !ok {
		return nil, fmt.Errorf("the PostgreSQL driver enqueues inside a pgx.Tx, got %T: begin the transaction on the same pgxpool.Pool", tx)
	}
	e := newExecutor(t, d.q)
	return &e, nil
}

// Retryable reports serialization failures, deadlocks and lock timeouts,
// and a transaction the server ended because it sat idle past
// TxIdleTimeout (its client froze): the server rolled it back, so it can
// run again on another connection.
func (d *engine) Retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01", "55P03", "25P03":
			return true
		}
	}
	return false
}

func (d *engine) SQLDB() *sql.DB {
	d.sqlOnce.Do(func() { d.sqlDB = stdlib.OpenDBFromPool(d.pool) })
	return d.sqlDB
}

func (d *engine) Close() error {
	if d.sqlDB != nil {
		d.sqlDB.Close()
	}
	if d.owned {
		d.pool.Close()
	}
	return nil
}

type txExecutor struct {
	executor
	tx *pipeTx
}

func (t *txExecutor) Commit(ctx context.Context) error {
	driver.CallBeforeCommit()
	return t.tx.Commit(ctx)
}
func (t *txExecutor) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

// OneStatementWrites: every write of this driver is one statement (see
// driver.OneStatementWriter).
func (d *engine) OneStatementWrites() {}
