// Package sqlexec is the database/sql implementation of driver.Executor
// that the MySQL and SQLite drivers share: the statements both run, the
// scanning of rows into driver types and the error wrapping. Each driver
// supplies a Dialect: its statements, how it passes keys and id lists,
// and the few steps it takes its own way (locking reads on MySQL, the
// single writer and its beacons on SQLite). Which errors are worth
// running a transaction again for stays the driver's Retryable, which
// Atomic meets through driver.InTx.
//
// Batches are set-wise: a batch of completions (ClaimCompleteMany) and of
// releases (SemaphoreReleaseMany) takes a fixed number of
// statements per MaxList rows, whatever the batch's size; a dialect may
// still do either its own way (SQLite, with RETURNING and json_each).
//
// Times are stored as Unix microseconds and durations as milliseconds, so
// no time zone setting of either database matters.
//
// What every dialect runs alike, PostgreSQL's pgx driver included (the
// pauses, policies, periodic schedules, process rows, inspection and
// listing), is written once in Shared, on a Conn each driver adapts to;
// the Executor embeds it.
package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqltext"
)

// DB is what *sql.DB and *sql.Tx have in common.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Executor runs bq's statements on one database/sql database, inside a
// transaction or outside any.
type Executor struct {
	// Shared runs the statements every dialect runs alike, on this
	// executor (conn).
	Shared

	d   Dialect
	q   *Queries
	drv driver.Driver // begins the transactions of single statements (exec)
	db  DB
	// inTx: db is a transaction (bq's own or the caller's).
	inTx bool
}

var _ driver.Executor = (*Executor)(nil)

// New returns an executor that runs statements on db outside any
// transaction; each write still runs in a transaction of its own, begun
// on drv (see Atomic).
func New(d Dialect, drv driver.Driver, db DB) *Executor {
	e := &Executor{d: d, q: d.Queries(), drv: drv, db: db}
	e.Shared = NewShared(conn{d, e}, &e.q.SharedQueries)
	return e
}

// conn is an Executor as Shared runs statements on it: each write in a
// transaction of its own outside one (exec), times as Unix microseconds.
type conn struct {
	Dialect
	e *Executor
}

func (c conn) Write(ctx context.Context, query string, args ...any) (int64, error) {
	return c.e.exec(ctx, query, args...)
}

func (c conn) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := c.e.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (c conn) QueryRow(ctx context.Context, query string, args ...any) Row {
	return c.e.db.QueryRowContext(ctx, query, args...)
}

func (c conn) InsertID(ctx context.Context, head string, args ...any) (int64, error) {
	var id int64
	err := c.e.single(ctx, func(x *Executor) error { // one INSERT
		ids, err := x.insertRows(ctx, head, len(args), args, true)
		if err == nil {
			id = ids[0]
		}
		return err
	})
	return id, err
}

func (c conn) Time(t time.Time) any { return Micros(t) }

func (c conn) JobListing(f driver.JobFilter) (string, []any) {
	s := c.ListSpelling()
	s.Time = func(t time.Time) any { return Micros(t) }
	s.Text = c.Text
	query, args := sqltext.ListJobs(f, s)
	return c.e.q.Spell(query), args
}

func (c conn) Names(query string, names []string) (string, []any) {
	items := make([]any, len(names))
	for i, n := range names {
		items[i] = c.Text(n)
	}
	return in(c.e, query, items)
}

// Wrap returns an executor writing inside the caller's transaction tx.
func Wrap(d Dialect, drv driver.Driver, tx DB) *Executor {
	e := New(d, drv, tx)
	e.inTx = true
	return e
}

// WrapUser is a database/sql driver's WrapTx: tx, the caller's, must be
// a *sql.Tx (name is the driver's database, for the error), and own makes
// the driver's executor of the Executor writing inside it.
func WrapUser(d Dialect, drv driver.Driver, name string, tx any, own func(*Executor) driver.Executor) (driver.Executor, error) {
	t, ok := tx.(*sql.Tx)
	if !ok {
		return nil, fmt.Errorf("the %s driver enqueues inside a *sql.Tx, got %T: begin the transaction on the same *sql.DB", name, tx)
	}
	return own(Wrap(d, drv, t)), nil
}

// DB is what the executor runs statements on.
func (e *Executor) DB() DB { return e.db }

// Tx is a transaction bq owns.
type Tx struct {
	*Executor
	tx   *sql.Tx
	end  func() // run once the transaction is over; may be nil
	over bool
}

var _ driver.Tx = (*Tx)(nil)

// Begun wraps tx, a transaction the driver began for bq; db runs its
// statements (tx itself, or tx through prepared statements). end, if not
// nil, runs once the transaction is over (SQLite frees its writer slot).
func Begun(d Dialect, drv driver.Driver, tx *sql.Tx, db DB, end func()) *Tx {
	return &Tx{Executor: Wrap(d, drv, db), tx: tx, end: end}
}

func (t *Tx) Commit(ctx context.Context) error {
	driver.CallBeforeCommit()
	err := t.tx.Commit()
	t.finish()
	return err
}

func (t *Tx) Rollback(ctx context.Context) error {
	err := t.tx.Rollback()
	t.finish()
	return err
}

// Ending commits or rolls back a transaction bq owns: a driver's own
// transaction type embeds it beside its executor, which embeds the
// transaction's Executor.
type Ending struct{ Tx *Tx }

func (e Ending) Commit(ctx context.Context) error   { return e.Tx.Commit(ctx) }
func (e Ending) Rollback(ctx context.Context) error { return e.Tx.Rollback(ctx) }

func (t *Tx) finish() {
	if !t.over && t.end != nil {
		t.end()
	}
	t.over = true
}

// based is any executor built on an Executor: a Tx, or a driver's own
// type embedding one.
type based interface{ base() *Executor }

func (e *Executor) base() *Executor { return e }

// once is a driver none of whose conflicts are worth running a
// transaction again for: driver.InTx then runs it once.
type once struct{ driver.Driver }

func (once) Retryable(error) bool { return false }

// Atomic runs fn, the several statements of one Executor method, in the
// executor's transaction. The engine decides where bq's transactions
// begin and end (driver.InTx, driver.Atomic); outside one, Atomic
// refuses rather than open one of its own.
func (e *Executor) Atomic(ctx context.Context, fn func(x *Executor) error) error {
	if !e.inTx {
		return driver.ErrNeedsTx
	}
	return fn(e)
}

// exec runs one write statement and returns the rows it changed. Outside
// a transaction it runs in one of its own, for the dialect's sake, not as
// a unit of work (one statement is atomic by itself): on MySQL a READ
// COMMITTED one whatever the pool's default isolation, so it takes no gap
// locks; on SQLite it queues on the process's writer, so writers never
// spin in the busy handler. A new transaction meets deadlocks like any
// bq transaction and is run again (driver.InTx); a single writer's runs
// once, as it has no deadlocks and a busy database has already waited
// out its busy timeout.
func (e *Executor) exec(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := e.single(ctx, func(x *Executor) error {
		res, err := x.db.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// single runs fn, one write statement, as exec does.
func (e *Executor) single(ctx context.Context, fn func(x *Executor) error) error {
	if e.inTx {
		return fn(e)
	}
	drv := e.drv
	if _, single := e.drv.(driver.SingleWriter); single {
		drv = once{drv}
	}
	return driver.InTx(ctx, drv, func(tx driver.Executor) error { return fn(tx.(based).base()) })
}

// Micros is how a time is stored: Unix microseconds.
func Micros(t time.Time) int64 { return t.UnixMicro() }

// FromMicros reads a stored time.
func FromMicros(us int64) time.Time { return time.UnixMicro(us) }

// fromMillis reads a stored duration.
func fromMillis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// optMicros reads a nullable time column.
func optMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return FromMicros(v.Int64)
}

// lastMicros writes a nullable time column: NULL for the zero time.
func lastMicros(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: Micros(t), Valid: true}
}
