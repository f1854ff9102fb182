package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
)

// dbtx is what a pool and a transaction have in common.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type executor struct {
	// Shared runs the statements every dialect runs alike, on db (conn).
	sqlexec.Shared

	db     dbtx
	q      *queries
	txIdle string        // for the transactions it begins itself (see pipeTx)
	plans  *genericPlans // nil: leave the plan to the server (collectGeneric)
}

func newExecutor(db dbtx, q *queries) executor {
	return executor{Shared: sqlexec.NewShared(conn{db, q}, &q.SharedQueries), db: db, q: q}
}

// MaxKeyBytes is the longest concurrency key (Group + "/" + Key) the
// PostgreSQL driver stores: its b-tree indexes hold at most 2704 bytes a
// row, so longer keys are refused at enqueue, never truncated. bq.MaxKeyBytes,
// checked before any driver is reached, is the limit users meet; this one
// is a backstop.
const MaxKeyBytes = 2048

func checkKey(key string) error {
	if len(key) > MaxKeyBytes {
		return fmt.Errorf("concurrency key %.40q... is %d bytes long: the PostgreSQL driver stores keys of at most %d bytes (Group + \"/\" + Key); use a shorter key, e.g. a hash of the long one",
			key, len(key), MaxKeyBytes)
	}
	return nil
}

// write runs a statement whose result the engine does not read. In a
// transaction bq owns it is queued and sent with the next statement or
// the commit (see pipeTx); elsewhere it runs at once.
func (e *executor) write(ctx context.Context, sql string, args ...any) error {
	if tx, ok := e.db.(*pipeTx); ok {
		tx.queue(sql, args)
		return nil
	}
	_, err := e.db.Exec(ctx, sql, args...)
	return err
}

// queueRead runs query and hands its rows to read: in bq's pipelined
// transaction, with the next statement, in its round trip (read is
// called before that statement's results are); elsewhere at once.
func (e *executor) queueRead(ctx context.Context, query string, args []any, read func(pgx.Rows) error) error {
	if tx, ok := e.db.(*pipeTx); ok {
		tx.queueRead(query, args, read)
		return nil
	}
	rows, err := e.db.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if err := read(rows); err != nil {
		return err
	}
	return rows.Err()
}

// collect reads every row of query with scan.
func collect[T any](ctx context.Context, db dbtx, scan pgx.RowToFunc[T], query string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scan)
}

// found reports whether a one-row read found its row: a missing row is
// no error.
func found(err error) (bool, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// scanJob reads jobColumns, then extra.
func scanJob(row pgx.Row, j *driver.Job, extra ...any) error {
	var durMS, rateMS int64
	var conflict, sequence, slots int16
	var more []byte
	dest := append([]any{&j.ID, &j.Kind, &j.Queue, &j.Args, &j.Priority, &j.Attempt, &j.MaxAttempts,
		&j.Limit.Key, &j.Limit.To, &durMS, &conflict, &j.Limit.MaxBlocked, &j.ScheduledAt, &j.CreatedAt,
		&j.Metadata, &j.Tags, &j.Rate.Key, &j.Rate.Limit, &rateMS, &more, &sequence, &j.HasDependents, &slots}, extra...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	driver.ScanSequence(j, int(sequence))
	j.Slots = int(slots)
	var err error
	if j.More, err = driver.DecodeMore(more); err != nil {
		return err
	}
	j.Rate.Period = time.Duration(rateMS) * time.Millisecond
	j.Limit.Duration = time.Duration(durMS) * time.Millisecond
	j.Limit.OnConflict = driver.OnConflict(conflict)
	return nil
}
