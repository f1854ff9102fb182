package bq

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"

	"github.com/bqueue/bq/internal/driver"
)

// InTx runs fn in a transaction on the client's database, begun for it
// on the pool bq uses, and commits it when fn returns nil: the
// application's own statements and bq's enqueues commit together, or
// not at all, on any database and without naming its driver:
//
//	err := client.InTx(ctx, func(ctx context.Context, tx bq.Tx) error {
//		// your statements, through bq.RawTx(tx): a pgx.Tx on PostgreSQL,
//		// a *sql.Tx on MySQL and SQLite
//		_, err := Charge.EnqueueTx(ctx, client, tx, ChargeArgs{OrderID: 42})
//		return err
//	})
//
// tx serves EnqueueTx, EnqueueManyTx, EnqueueBatchTx and ListJobsTx,
// and the bqtest assertions' Tx forms, until fn returns. When fn returns
// an error, the transaction is rolled back and InTx returns that error
// as it is; when fn panics, it is rolled back and the panic goes on. fn
// must not commit or roll back tx itself. InTx runs fn once: a transient
// conflict (deadlock, serialization failure, busy database) met inside
// comes back from EnqueueTx as ErrConflict, and one met at the commit is
// returned wrapping ErrConflict, for the caller to run InTx again if fn
// may be repeated.
//
// The transaction is READ COMMITTED on PostgreSQL (the server's default
// isolation) and MySQL/MariaDB (what bq's own transactions use), and
// takes SQLite's write lock at its start (BEGIN IMMEDIATE, as the driver
// opens its database): keep it short there, since every writer of the
// file waits for it. bq sets no timeout inside it.
func (c *Client) InTx(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	switch {
	case c == nil:
		return errors.New("InTx: the client is nil: call it on the *bq.Client from bq.Open or bq.NewClient")
	case ctx == nil:
		return errors.New("InTx: the context is nil: pass context.Background() or the request's context")
	case fn == nil:
		return errors.New("InTx: fn is nil: pass the func(ctx, tx) error to run in the transaction")
	}
	ut, err := c.beginUser(ctx)
	if err != nil {
		return fmt.Errorf("InTx: begin a transaction: %w", err)
	}
	returned := false
	defer func() {
		if !returned {
			// fn panicked, and the panic goes on, or called
			// runtime.Goexit (t.FailNow in a test).
			_ = ut.rollback(context.WithoutCancel(ctx))
		}
	}()
	err = fn(ctx, driver.WrapUserTx(c.drv.Dialect(), ut.raw))
	returned = true
	if err != nil {
		if rbErr := ut.rollback(context.WithoutCancel(ctx)); rbErr != nil && !txDone(rbErr) {
			return errors.Join(err, fmt.Errorf("InTx: roll back: %w", rbErr))
		}
		return err
	}
	if err := ut.commit(ctx); err != nil {
		switch {
		case txDone(err):
			return fmt.Errorf("InTx: commit: %w: do not commit or roll back InTx's transaction in fn; return nil to commit it, or an error to roll it back", err)
		case c.drv.Retryable(err):
			return fmt.Errorf("%w: InTx: commit: %w", ErrConflict, err)
		}
		return fmt.Errorf("InTx: commit: %w", err)
	}
	return nil
}

// RawTx returns the transaction inside tx, for the application's own
// statements: a pgx.Tx on PostgreSQL, a *sql.Tx on MySQL/MariaDB and
// SQLite; the one InTx began, or the one you wrapped with postgres.Tx,
// mysql.Tx or sqlite.Tx. It is nil when tx is nil or no driver made it.
//
//	sqlTx := bq.RawTx(tx).(*sql.Tx) // MySQL, SQLite
//	pgTx := bq.RawTx(tx).(pgx.Tx)   // PostgreSQL
func RawTx(tx Tx) any {
	if tx == nil {
		return nil
	}
	_, raw, ok := driver.UserTxOf(tx)
	if !ok {
		return nil
	}
	return raw
}

// userTx is a transaction InTx began: the raw pgx.Tx or *sql.Tx, and
// how to end it.
type userTx struct {
	raw              any
	commit, rollback func(context.Context) error
}

// beginUser begins a transaction for InTx on the pool the client's
// driver uses.
func (c *Client) beginUser(ctx context.Context) (userTx, error) {
	if c.drv.Dialect() == driver.Postgres {
		return beginPgx(ctx, c.pub)
	}
	d, ok := c.pub.(interface{ DB() *sql.DB })
	if !ok {
		return userTx{}, fmt.Errorf("the %s driver %T has no DB method", c.drv.Dialect(), c.pub)
	}
	var opts *sql.TxOptions // SQLite: BEGIN IMMEDIATE, as sqlite.DSN opens it
	if c.drv.Dialect() == driver.MySQL {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := d.DB().BeginTx(ctx, opts)
	if err != nil {
		return userTx{}, err
	}
	return userTx{raw: tx,
		commit:   func(context.Context) error { return tx.Commit() },
		rollback: func(context.Context) error { return tx.Rollback() }}, nil
}

// beginPgx begins a pgx.Tx on the pool of d, a *postgres.Driver:
// d.Pool().Begin(ctx). The root package links no driver and so cannot
// name pgx's types; it makes that one call through reflect and ends the
// transaction through pgx.Tx's Commit and Rollback, whose signatures it
// can name. (A driver method beginning the caller's transaction would
// do without reflect: internal/driver and the drivers are another line
// of work's.)
func beginPgx(ctx context.Context, d Driver) (userTx, error) {
	pool := reflect.ValueOf(d).MethodByName("Pool")
	if !pool.IsValid() || pool.Type().NumIn() != 0 || pool.Type().NumOut() != 1 {
		return userTx{}, fmt.Errorf("the PostgreSQL driver %T has no Pool method", d)
	}
	p := pool.Call(nil)[0]
	if p.Kind() == reflect.Pointer && p.IsNil() {
		return userTx{}, errors.New("the PostgreSQL driver has no pool")
	}
	begin := p.MethodByName("Begin")
	if !begin.IsValid() || begin.Type().NumIn() != 1 || begin.Type().NumOut() != 2 {
		return userTx{}, fmt.Errorf("the PostgreSQL driver's pool %s has no Begin(ctx) method", p.Type())
	}
	out := begin.Call([]reflect.Value{reflect.ValueOf(ctx)})
	if err, _ := out[1].Interface().(error); err != nil {
		return userTx{}, err
	}
	tx, ok := out[0].Interface().(interface {
		Commit(context.Context) error
		Rollback(context.Context) error
	})
	if !ok {
		return userTx{}, fmt.Errorf("the PostgreSQL driver's pool began a %s, no pgx.Tx", out[0].Type())
	}
	return userTx{raw: tx, commit: tx.Commit, rollback: tx.Rollback}, nil
}

// txDone reports an error that says the transaction was already over:
// database/sql's ErrTxDone, pgx's ErrTxClosed (which the root package
// cannot name).
func txDone(err error) bool {
	return errors.Is(err, sql.ErrTxDone) || err.Error() == "tx is closed"
}

// Tx is a transaction of yours for EnqueueTx, EnqueueManyTx,
// EnqueueBatchTx and ListJobsTx: the one Client.InTx hands its function
// on any database, or one you began, wrapped by the driver of its
// database: postgres.Tx(pgxTx), mysql.Tx(sqlTx) or sqlite.Tx(sqlTx).
// RawTx returns the pgx.Tx or *sql.Tx inside.
//
// A raw pgx.Tx or *sql.Tx is not a Tx, so passing one fails to compile,
// with an error naming the wrappers: "pgx.Tx does not implement bq.Tx
// (missing method MadeByPostgresTxMySQLTxOrSQLiteTx)". Wrap it, or let
// InTx begin the transaction.
type Tx interface {
	// MadeByPostgresTxMySQLTxOrSQLiteTx marks a transaction a driver
	// wrapped; it does nothing. Its name is the compiler's hint.
	MadeByPostgresTxMySQLTxOrSQLiteTx()
	// TxDialect names the database the transaction is on: "postgres",
	// "mysql" or "sqlite".
	TxDialect() string
}

// unwrapTx returns the pgx.Tx or *sql.Tx inside tx, checking that it is
// on the client's kind of database; call names the method for the
// error, which suggests the same call without "Tx" instead.
func unwrapTx(c *Client, tx Tx, call string) (any, error) {
	var dialect driver.Dialect
	if c != nil {
		dialect = c.drv.Dialect()
	}
	return driver.UnwrapUserTx(tx, dialect, call)
}
