package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Shared runs the statements every dialect runs alike, PostgreSQL's
// included (SharedQueries): the pauses, the policies and key overrides,
// the periodic schedules, a process's row and claims, the inspection,
// the job listing and the removal of one execution row. What a dialect
// does its own way comes in through its Conn: how a statement runs
// (database/sql or pgx), how a time, a queue or a key is passed, how a
// list of names is bound.
type Shared struct {
	c Conn
	q *SharedQueries
}

// NewShared returns the shared statements q, run on c.
func NewShared(c Conn, q *SharedQueries) Shared { return Shared{c: c, q: q} }

// Conn is what Shared needs of a dialect's executor.
type Conn interface {
	Encoding

	// Write runs a write statement and returns the rows it changed.
	Write(ctx context.Context, query string, args ...any) (int64, error)
	Query(ctx context.Context, query string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
	// InsertID runs head, an INSERT up to VALUES, on one row of args and
	// returns the new row's id.
	InsertID(ctx context.Context, head string, args ...any) (int64, error)

	// Time passes a time as the dialect's columns hold it (Unix
	// microseconds on MySQL and SQLite); At reads either form back.
	Time(t time.Time) any
	// Names binds query's list (ListMarker, or the dialect's own
	// spelling of it) to names, each passed as Text.
	Names(query string, names []string) (string, []any)
	// JobListing is the listing of f's jobs, newest first, and its
	// arguments (sqltext.ListJobs in the dialect's spelling).
	JobListing(f driver.JobFilter) (query string, args []any)
	// SearchKeys is the key search statement (semaphore columns key,
	// value, lim, blocked, multi, duration_ms, expires_at; args pattern,
	// max) and the pattern of the keys that start with prefix and end
	// with suffix, matched byte for byte.
	SearchKeys(prefix, suffix string) (query string, pattern any)
}

// Encoding is how a dialect passes a value to its columns, which keys
// they hold, and how it reports a missing table.
type Encoding interface {
	// Text passes a queue, namespace or key as its column takes it (MySQL's
	// VARBINARY columns take []byte, so no character set alters them).
	Text(s string) any
	// KeyArgs are the arguments that look a full key up (MySQL: its
	// SHA-256, which the indexes hold, then the key itself).
	KeyArgs(key string) []any
	// CheckKey refuses a key too long for the dialect's columns.
	CheckKey(key string) error
	// NoTable reports that err is about a table that does not exist.
	NoTable(err error) bool
}

// Row is one row read: *sql.Row, pgx.Row.
type Row interface {
	Scan(dest ...any) error
}

// Rows are the rows of a query: *sql.Rows, or pgx's adapted.
type Rows interface {
	Row
	Next() bool
	Err() error
	Close() error
}

// collect scans every row of query with scan.
func collect[T any](ctx context.Context, c Conn, scan func(Row) (T, error), query string, args ...any) ([]T, error) {
	rows, err := c.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return scanAll(rows, func(r Rows) (T, error) { return scan(r) })
}

// At scans a time column into t, in either form a dialect stores it:
// Unix microseconds, or a timestamp (PostgreSQL). NULL reads as the zero
// time.
func At(t *time.Time) sql.Scanner { return stamp{t} }

type stamp struct{ t *time.Time }

func (s stamp) Scan(src any) error {
	if v, ok := src.(time.Time); ok {
		*s.t = v
		return nil
	}
	var us sql.NullInt64
	if err := us.Scan(src); err != nil {
		return fmt.Errorf("read a time: %w", err)
	}
	*s.t = optMicros(us)
	return nil
}

// OptAt scans a nullable time column as At does; NULL reads as nil.
func OptAt(t **time.Time) sql.Scanner { return optStamp{t} }

type optStamp struct{ t **time.Time }

func (s optStamp) Scan(src any) error {
	if src == nil {
		*s.t = nil
		return nil
	}
	var v time.Time
	if err := At(&v).Scan(src); err != nil {
		return err
	}
	*s.t = &v
	return nil
}

// Executions names a statement per execution table a job can be taken
// out of by hand.
type Executions struct{ Ready, Scheduled, Blocked, Waiting string }

// Of is the statement of state's table; false for a state with none.
func (x Executions) Of(state driver.JobState) (string, bool) {
	switch state {
	case driver.StateReady:
		return x.Ready, true
	case driver.StateScheduled:
		return x.Scheduled, true
	case driver.StateBlocked:
		return x.Blocked, true
	case driver.StateWaiting:
		return x.Waiting, true
	}
	return "", false
}
