package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

const beginSQL = "begin isolation level read committed"

// boundSQL is SET LOCAL idle_in_transaction_session_timeout, with the
// value as a parameter, and keyPlans; both end with the transaction.
const boundSQL = "select set_config('" + idleTimeoutParam + "', $1, true), " + keyPlans

// pipeTx is a transaction bq owns that spends fewer round trips: BEGIN
// goes out with the first statement, and writes whose result the engine
// never reads (finish a job, save a semaphore) are queued and go out with
// the next statement or with COMMIT, all in one pipelined batch. A
// completion is then two round trips (BEGIN + delete the claim; finish +
// COMMIT) instead of four. Statements still run in the order they were
// issued, inside the transaction, so locks and visibility are unchanged;
// only the error of a queued write surfaces at the next call instead of
// its own, and the transaction is rolled back all the same.
//
// On a session without a bound of its own (the application's pool), the
// batch carrying BEGIN also sets idleTimeout for this transaction only.
// Every transaction plans without sequential scans (keyPlans): bq's own
// transactions take their rows by key.
type pipeTx struct {
	conn        *pgxpool.Conn
	idleTimeout string // milliseconds; "" when the session carries a bound
	begun       bool   // BEGIN has been sent
	pending     []queued
	done        bool
}

type queued struct {
	sql  string
	args []any
	read func(pgx.Rows) error // nil for a write: its rows are not read
}

// queue defers a write until the next statement or the commit.
func (t *pipeTx) queue(sql string, args []any) {
	t.pending = append(t.pending, queued{sql: sql, args: args})
}

// queueRead defers a statement whose rows read takes when it goes out,
// with the next statement or the commit.
func (t *pipeTx) queueRead(sql string, args []any, read func(pgx.Rows) error) {
	t.pending = append(t.pending, queued{sql: sql, args: args, read: read})
}

// direct reports whether nothing waits to be sent before a statement.
func (t *pipeTx) direct() bool { return t.begun && len(t.pending) == 0 }

// send sends BEGIN if not yet sent, the queued writes and sql, and reads
// the results of all but sql's.
func (t *pipeTx) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	if !t.begun {
		b.Queue(beginSQL)
		if t.idleTimeout != "" {
			b.Queue(boundSQL, t.idleTimeout)
		} else {
			b.Queue(keyPlansSQL)
		}
	}
	for _, q := range t.pending {
		b.Queue(q.sql, q.args...)
	}
	b.Queue(sql, args...)
	pending, first := t.pending, !t.begun
	t.begun, t.pending = true, nil
	br := t.conn.SendBatch(ctx, b)
	if first {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, fmt.Errorf("begin transaction: %w", err)
		}
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, fmt.Errorf("set the transaction's idle bound and plans: %w", err)
		}
	}
	for _, q := range pending {
		var err error
		if q.read == nil {
			_, err = br.Exec()
		} else if rows, qerr := br.Query(); qerr != nil {
			err = qerr
		} else {
			err = q.read(rows)
			rows.Close()
			err = errors.Join(err, rows.Err())
		}
		if err != nil {
			br.Close()
			return nil, fmt.Errorf("queued statement %q: %w", firstWords(q.sql), err)
		}
	}
	return br, nil
}

func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.direct() {
		return t.conn.Exec(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.direct() {
		return t.conn.Query(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, errors.Join(err, br.Close())
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.direct() {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	rows, err := t.Query(ctx, sql, args...)
	return &batchRow{rows: rows, err: err}
}

func (t *pipeTx) Commit(ctx context.Context) error {
	defer t.release()
	switch {
	case !t.begun && len(t.pending) == 0:
		return nil // nothing was ever sent
	case t.direct():
		tag, err := t.conn.Exec(ctx, "commit")
		return commitResult(tag, err)
	}
	br, err := t.send(ctx, "commit", nil)
	if err != nil {
		t.rollback(ctx)
		return err
	}
	tag, err := br.Exec()
	err = errors.Join(err, br.Close())
	if err != nil {
		t.rollback(ctx)
	}
	return commitResult(tag, err)
}

// commitResult turns a COMMIT that rolled back (the transaction had
// failed) into an error, as pgx.Tx.Commit does.
func commitResult(tag pgconn.CommandTag, err error) error {
	if err == nil && tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return err
}

func (t *pipeTx) Rollback(ctx context.Context) error {
	if t.done {
		return nil // ended already: a second Rollback changes nothing
	}
	defer t.release()
	t.pending = nil
	if !t.begun {
		return nil
	}
	_, err := t.conn.Exec(ctx, "rollback")
	return err
}

func (t *pipeTx) rollback(ctx context.Context) {
	if !t.conn.Conn().IsClosed() {
		_, _ = t.conn.Exec(context.WithoutCancel(ctx), "rollback")
	}
}

// release returns the connection; the pool closes one left inside a
// transaction.
func (t *pipeTx) release() {
	if !t.done {
		t.done = true
		t.conn.Release()
	}
}

// batchRows are the rows of a batch's last statement; the batch is closed
// with them, freeing the connection.
type batchRows struct {
	pgx.Rows
	br       pgx.BatchResults
	closed   bool
	closeErr error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		r.closeErr = r.br.Close()
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.closeErr
}

// batchRow is QueryRow over batchRows, with pgx's semantics.
type batchRow struct {
	rows pgx.Rows
	err  error
}

func (r *batchRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

func firstWords(sql string) string {
	f := strings.Fields(sql)
	return strings.Join(f[:min(len(f), 4)], " ")
}
