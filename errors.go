package bq

import (
	"errors"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/worker"
)

var (
	// ErrInvalidJob wraps every problem with a job definition or an
	// enqueue (its options, its key); the message names the field and the
	// fix.
	ErrInvalidJob = errors.New("invalid job")
	// ErrInvalidArgument wraps every other bad input refused before it
	// reaches the database (a key or limit given to SetKeyLimit, a queue
	// policy, a Config); the message names the argument and the fix.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotMigrated reports that bq's tables are missing or older than
	// this version of bq.
	ErrNotMigrated = errors.New("bq tables are missing or out of date: run client.Migrate(ctx) or `bq migrate up --dsn ...`")
	// ErrConflict wraps a transient conflict (deadlock, serialization
	// failure, busy database) met inside the caller's transaction: roll
	// the transaction back and run it again. Inside its own transactions
	// bq retries these itself.
	ErrConflict = errors.New("transient database conflict: roll back and retry the transaction")
	// ErrReadOnly wraps the database's refusal of a write because it
	// takes none: a standby (connect to the primary, e.g. with
	// target_session_attrs=read-write on PostgreSQL), a database or
	// server set read-only, or a SQLite file bq may not write. Nothing was
	// stored; a running client keeps what it accepted and goes on by
	// itself once writes work again.
	ErrReadOnly = errors.New("the database refuses writes (read-only: a standby, a read-only database or server, or a file bq may not write): point bq at the primary or make it writable")
	// ErrDatabaseFull wraps the database's refusal of a write because its
	// disk (or a table's space) is full: nothing was stored; free space
	// and bq goes on by itself.
	ErrDatabaseFull = errors.New("the database is full (out of disk or table space): free space and bq goes on by itself")
)

// ErrLeaseLost is the cancellation cause of a run whose process can no
// longer be sure the run is still its own: no heartbeat of the process
// landed for so long that a dispatcher may declare it dead (or reclaim the
// run's slot) and run the job elsewhere, or its claim was found taken.
// Read it with context.Cause(ctx); ctx.Err() is context.Canceled.
var ErrLeaseLost = errors.New("bq: lease lost")

// Permanent wraps err so the job fails at once, without the retries left
// to it: return it from a job whose input can never succeed.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return worker.Permanent(err)
}

func permanent(err error) error { return Permanent(err) }

// Snooze returns an error that ends the run without spending an attempt:
// the job's slot is released (the next blocked job of its key takes it)
// and the job is scheduled to run again after d, admitted when due like
// any scheduled job. Nothing bounds how often a job snoozes: count in its
// args or check a deadline if it must give up. A d of zero or less fails
// the run with an error saying so, as any error would.
func Snooze(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: bq.Snooze: the delay must be positive, got %s: pass how long to wait, e.g. bq.Snooze(30*time.Second)", ErrInvalidArgument, d)
	}
	return &worker.SnoozeError{Delay: d}
}
