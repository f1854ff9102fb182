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
	listen *pgx.ConnConfig   // the listener's own connection; nil: one taken out of pool
	probe  probeTimes        // the listener's check that it hears (notify.go)
	byRule driver.RuleQueues // the queues claimed by the rule's transaction (claims.go)

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
// Options: ListenWith.
func New(pool *pgxpool.Pool, opts ...Option) *Driver {
	d := newDriver(pool, false, migrations.DefaultPrefix)
	for _, o := range opts {
		o(d)
	}
	return &Driver{driver.Seal(d)}
}

// An Option configures the driver New makes.
type Option func(*engine)

// ListenWith gives bq's listener (LISTEN, for wake-ups from other
// processes) a connection of its own, made from cfg, instead of one taken
// out of the pool. Use it when the pool goes through a pooler in
// transaction mode (PgBouncer's pool_mode = transaction), through which
// LISTEN does not work: cfg then reaches PostgreSQL directly (or through
// a pooler in session mode), and it must reach the pool's database. cfg
// is copied; the connection is made when the listener starts, and again
// after it breaks. Open's DSN says the same with listen_dsn
// (ListenDSNParam).
func ListenWith(cfg *pgx.ConnConfig) Option {
	cfg = cfg.Copy()
	return func(d *engine) { d.listen = cfg }
}

// Open connects to dsn (postgres://user:pass@host:5432/db?...). Its
// sessions carry idle_in_transaction_session_timeout = TxIdleTimeout
// unless the DSN sets it.
//
// Behind a pooler in transaction mode (PgBouncer), which refuses that
// parameter or drops it, Open bounds bq's own transactions instead (SET
// LOCAL, as on a pool of your own) and, unless the DSN chooses pgx's
// default_query_exec_mode itself, runs statements in mode exec: pgx's
// default prepares named statements on each connection, which do not
// survive the pooler's switching of server connections (PgBouncer 1.21+
// with max_prepared_statements keeps them: say
// default_query_exec_mode=cache_statement to use them). LISTEN needs a
// connection of its own to PostgreSQL itself: give it with listen_dsn
// (ListenDSNParam); without it bq's workers find work from other
// processes by polling, and the listener logs a warning saying so.
func Open(ctx context.Context, dsn string) (*Driver, error) {
	dsn, listen, err := splitListenDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL DSN: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL DSN: %w (expected postgres://user:pass@host:5432/db)", redactParseError(err))
	}
	if _, ok := cfg.ConnConfig.RuntimeParams[ListenDSNParam]; ok {
		return nil, fmt.Errorf("parse PostgreSQL DSN: %w", errKeyValueListen)
	}
	bound := !setsIdleTimeout(cfg.ConnConfig.RuntimeParams)
	if bound {
		cfg.ConnConfig.RuntimeParams[idleTimeoutParam] = milliseconds(txIdleTimeout)
	}
	pooled, err := checkSession(ctx, cfg.ConnConfig, bound)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL at %s:%d: %w (is the server running and the DSN right?)", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	if pooled {
		delete(cfg.ConnConfig.RuntimeParams, idleTimeoutParam)
		if !setsExecMode(dsn) {
			cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open PostgreSQL pool: %w", err)
	}
	d := newDriver(pool, true, migrations.DefaultPrefix)
	if pooled {
		d.txIdle = milliseconds(txIdleTimeout)
	}
	d.listen = listen
	return &Driver{driver.Seal(d)}, nil
}

// checkSession connects once with cfg and reports whether a pooler
// stands between bq and PostgreSQL, keeping server sessions to itself:
// with bound (cfg carries bq's idle_in_transaction_session_timeout) the
// pooler refuses the parameter (PgBouncer, unless its
// ignore_startup_parameters lists it) or drops it (when it does), and the
// session does not carry it. Without bound (the DSN chose its own value),
// it reports false.
func checkSession(ctx context.Context, cfg *pgx.ConnConfig, bound bool) (pooled bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if bound && refusedParam(err, idleTimeoutParam) {
		pooled = true
		without := cfg.Copy()
		delete(without.RuntimeParams, idleTimeoutParam)
		conn, err = pgx.ConnectConfig(ctx, without)
	}
	if err != nil {
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && strings.HasPrefix(pe.Message, "unsupported startup parameter") {
			return false, fmt.Errorf("%w: a pooler (PgBouncer) refuses the DSN's parameter; take it out of the DSN and set it on the role (ALTER ROLE ... SET), or list it in the pooler's ignore_startup_parameters", err)
		}
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if pooled || !bound {
		return pooled, nil
	}
	// The simple protocol: no statement is prepared, which a pooler in
	// transaction mode could lose between round trips.
	var setting string
	if err := conn.QueryRow(ctx, "SELECT setting FROM pg_settings WHERE name = '"+idleTimeoutParam+"'",
		pgx.QueryExecModeSimpleProtocol).Scan(&setting); err != nil {
		return false, fmt.Errorf("read %s: %w", idleTimeoutParam, err)
	}
	return setting != milliseconds(txIdleTimeout), nil
}

// refusedParam reports a server (a pooler) refusing startup parameter
// name: PgBouncer answers "unsupported startup parameter: name".
func refusedParam(err error, name string) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pe.Message == "unsupported startup parameter: "+name
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
	d := &engine{pool: pool, owned: owned, prefix: prefix, q: newQueries(prefix), probe: probeTimes{probeWait, deafRecheck}}
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
	return &engine{pool: d.pool, owned: d.owned, prefix: prefix, q: newQueries(prefix), txIdle: d.txIdle, listen: d.listen, probe: d.probe}
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

// Refusal reports read_only_sql_transaction (a standby, or
// default_transaction_read_only) and disk_full.
func (d *engine) Refusal(err error) driver.Refusal {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "25006":
			return driver.ReadOnly
		case "53100":
			return driver.Full
		}
	}
	return driver.NotRefused
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
