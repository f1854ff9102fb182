// Package driver is the contract between bq's engine and a database.
//
// A driver implements every statement bq runs, in its own dialect; the
// engine (semaphore admission, job lifecycle, dispatcher) decides which
// statements run, in which order, inside which transaction. State is which
// table holds a job: ready, scheduled, blocked, claimed or failed; a job in
// none of them is finished.
//
// Dead processes. A process is dead when its row is gone, or on evidence:
// it has been silent (no heartbeat recorded) for longer than both the
// dispatcher's ProcessDeadAfter and its own DeadAfter, and the database
// was writable over that silence: another process's heartbeats landed
// without a gap for at least as long, within it (from the later of the
// silent process's last beat and the other's BeatingSince, to the other's
// last beat). A silence every process shared (an outage, a database
// locked by a frozen writer) is no evidence, so no live process is
// declared dead for it.
package driver

import (
	"context"
	"database/sql"
)

// Dialect names a database family.
type Dialect string

const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
	MySQL    Dialect = "mysql"
)

// Driver opens transactions on one database.
type Driver interface {
	Dialect() Dialect
	// Prefix is the table-name prefix every statement uses.
	Prefix() string
	// WithPrefix returns the driver on the same connections, naming
	// tables with prefix. The prefix must already be validated.
	WithPrefix(prefix string) Driver
	// Exec runs statements outside any transaction, each on its own.
	Exec() Executor
	// Begin starts a write transaction owned by bq: READ COMMITTED on
	// PostgreSQL and MySQL, BEGIN IMMEDIATE on SQLite.
	Begin(ctx context.Context) (Tx, error)
	// Claim takes up to p.Max ready jobs of p.Queue for p.ProcessID within
	// the queue's gate (paused: none; MaxActive: a cap on its running
	// jobs), the driver's best way: ClaimWithin with its ClaimWays.
	Claim(ctx context.Context, p ClaimParams) ([]*Claim, error)
	// WrapTx adapts the caller's transaction (pgx.Tx, *sql.Tx) so bq can
	// write inside it.
	WrapTx(tx any) (Executor, error)
	// Retryable reports whether err is a transient conflict (deadlock,
	// serialization failure, busy database) worth running the
	// transaction again for.
	Retryable(err error) bool
	// Refusal reports whether err is the database refusing writes: read
	// only (a standby, a read-only database or transaction) or full (out
	// of disk); NotRefused for any other error.
	Refusal(err error) Refusal
	// SQLDB returns a database/sql handle for migrations.
	SQLDB() *sql.DB
	// MigrationLock serialises bq's migrations of this prefix across
	// processes until unlock is called: several processes may migrate at
	// once on start-up, and the others must wait for the first rather
	// than fail half-way. The lock is the database's own (PostgreSQL's
	// advisory lock, MySQL's GET_LOCK, a file lock beside a SQLite file),
	// held by a session or file that ends with the process, so a
	// migrator that dies releases it. It waits at most MigrationLockWait.
	MigrationLock(ctx context.Context) (unlock func(), err error)
	// Close releases what the driver opened itself; a wrapped pool or
	// *sql.DB belongs to the caller and stays open.
	Close() error
}

// Tx is a transaction bq owns.
type Tx interface {
	Executor
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Executor runs bq's statements, inside or outside a transaction. It is
// the union of the roles below; the engine's packages each take only the
// roles they use, so they can be tested against a fake.
type Executor interface {
	JobStore
	UniqueStore
	ClaimStore
	SemaphoreStore
	RateStore
	Maintenance
	PolicyStore
	PauseStore
	PeriodicStore
	ProcessStore
	Inspector
	InboxStore
	DependencyStore
	AdaptStore
}

// SingleWriter is a driver whose write transactions take one lock for
// the whole database (SQLite): package sqlexec runs a lone write
// statement in a transaction of its own there.
type SingleWriter interface {
	SingleWriter()
}

// Refusal is why a database refused a write (Driver.Refusal).
type Refusal int

const (
	NotRefused Refusal = iota
	// ReadOnly: a standby, or a database or session set read-only.
	ReadOnly
	// Full: the disk (or a table's space) is full.
	Full
)
