// Package postgres runs bq on PostgreSQL through a pgx/v5 pool.
//
//	pool, _ := pgxpool.New(ctx, "postgres://localhost/app")
//	client, _ := bq.NewClient(postgres.New(pool), bq.Config{})
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/migrations"
)

// Driver is bq's PostgreSQL driver.
type Driver struct {
	pool   *pgxpool.Pool
	owned  bool // opened by Open, closed by Close
	prefix string
	q      *queries

	sqlOnce sync.Once
	sqlDB   *sql.DB
}

// New wraps an existing pool; the pool stays the caller's to close.
func New(pool *pgxpool.Pool) *Driver {
	return newDriver(pool, false, migrations.DefaultPrefix)
}

// Open connects to dsn (postgres://user:pass@host:5432/db?...).
func Open(ctx context.Context, dsn string) (*Driver, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL DSN: %w (expected postgres://user:pass@host:5432/db)", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open PostgreSQL pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL at %s:%d: %w (is the server running and the DSN right?)", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return newDriver(pool, true, migrations.DefaultPrefix), nil
}

func newDriver(pool *pgxpool.Pool, owned bool, prefix string) *Driver {
	return &Driver{pool: pool, owned: owned, prefix: prefix, q: newQueries(prefix)}
}

// Pool returns the underlying pool.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

func (d *Driver) Dialect() driver.Dialect { return driver.Postgres }
func (d *Driver) Prefix() string          { return d.prefix }

func (d *Driver) WithPrefix(prefix string) driver.Driver {
	return &Driver{pool: d.pool, owned: d.owned, prefix: prefix, q: newQueries(prefix)}
}

func (d *Driver) Exec() driver.Executor { return &executor{db: d.pool, q: d.q} }

// Begin takes a connection for a READ COMMITTED transaction; BEGIN itself
// goes out with the first statement (see pipeTx).
func (d *Driver) Begin(ctx context.Context) (driver.Tx, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	tx := &pipeTx{conn: conn}
	return &txExecutor{executor: executor{db: tx, q: d.q}, tx: tx}, nil
}

func (d *Driver) WrapTx(tx any) (driver.Executor, error) {
	t, ok := tx.(pgx.Tx)
	if !ok {
		return nil, fmt.Errorf("the PostgreSQL driver enqueues inside a pgx.Tx, got %T: begin the transaction on the same pgxpool.Pool", tx)
	}
	return &executor{db: t, q: d.q}, nil
}

// Retryable reports serialization failures, deadlocks and lock timeouts.
func (d *Driver) Retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01", "55P03":
			return true
		}
	}
	return false
}

func (d *Driver) SQLDB() *sql.DB {
	d.sqlOnce.Do(func() { d.sqlDB = stdlib.OpenDBFromPool(d.pool) })
	return d.sqlDB
}

func (d *Driver) Close() error {
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
