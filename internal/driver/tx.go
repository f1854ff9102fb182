package driver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// TxIdleTimeout bounds how long the server lets a session sit idle inside
// a transaction bq owns before it ends the session and rolls the
// transaction back: a client frozen or gone mid-transaction (SIGSTOP, a
// frozen VM, a cut network) releases its row locks within it. bq runs no
// user code inside its own transactions, so a live client never comes
// near it. The same value bounds a MySQL/MariaDB lock wait.
const TxIdleTimeout = 10 * time.Second

// maxTxAttempts bounds how often InTx runs a transaction that keeps
// meeting transient conflicts.
const maxTxAttempts = 10

// RetriedConflicts counts the transactions InTx has run again in this
// process after a transient conflict (deadlock, lock wait timeout,
// serialization failure, busy database). Tests and metrics read it.
var RetriedConflicts atomic.Int64

// InTx runs fn in a transaction bq owns and commits it. A deadlock,
// serialization failure or busy database rolls back and runs fn again,
// with jittered backoff, up to maxTxAttempts times; fn must therefore do
// nothing outside the database that it cannot repeat.
func InTx(ctx context.Context, d Driver, fn func(ex Executor) error) error {
	var err error
	for attempt := range maxTxAttempts {
		if attempt > 0 {
			backoff := time.Duration(1<<min(attempt, 7)) * time.Millisecond
			backoff += rand.N(backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			}
		}
		if err = runTx(ctx, d, fn); err == nil || !d.Retryable(err) {
			return err
		}
		if attempt < maxTxAttempts-1 {
			RetriedConflicts.Add(1)
		}
	}
	return fmt.Errorf("gave up after %d conflicting attempts: %w", maxTxAttempts, err)
}

func runTx(ctx context.Context, d Driver, fn func(ex Executor) error) error {
	tx, err := d.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// ErrNeedsTx is an Executor method that runs several statements, called
// outside a transaction: call it through InTx or Atomic.
var ErrNeedsTx = errors.New("this method runs several statements: call it in a transaction (driver.InTx or driver.Atomic)")

// OneStatementWriter is a driver each of whose writing Executor methods
// runs one statement, atomic by itself (PostgreSQL, whose multi-table
// writes are single statements with CTEs). Atomic runs them outside a
// transaction, saving its BEGIN and COMMIT.
type OneStatementWriter interface {
	OneStatementWrites()
}

// Atomic runs fn, which makes one write (one Executor method that
// writes) and nothing that must commit with another, atomically: on
// d.Exec() when d's writes are single statements, else in a transaction
// of its own (InTx). The engine, not a driver, decides where bq's
// transactions begin and end; a driver's method that needs several
// statements runs them in the transaction it is given.
func Atomic(ctx context.Context, d Driver, fn func(ex Executor) error) error {
	if _, ok := d.(OneStatementWriter); ok {
		return fn(d.Exec())
	}
	return InTx(ctx, d, fn)
}
