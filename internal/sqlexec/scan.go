package sqlexec

import (
	"context"
	"database/sql"
	"errors"

	"github.com/bqueue/bq/internal/driver"
)

// ScanJob reads sqltext.JobColumns into j, then extra.
func ScanJob(scan func(...any) error, j *driver.Job, extra ...any) error {
	var durMS, rateMS int64
	var conflict, sequence int
	var args, more []byte
	dest := append([]any{&j.ID, &j.Kind, &j.Queue, &args, &j.Priority, &j.Attempt, &j.MaxAttempts,
		&j.Limit.Key, &j.Limit.To, &durMS, &conflict, &j.Limit.MaxBlocked, At(&j.ScheduledAt), At(&j.CreatedAt),
		&j.Metadata, &j.Tags, &j.Rate.Key, &j.Rate.Limit, &rateMS, &more, &sequence, &j.HasDependents, &j.Slots}, extra...)
	if err := scan(dest...); err != nil {
		return err
	}
	driver.ScanSequence(j, sequence)
	var err error
	if j.More, err = driver.DecodeMore(more); err != nil {
		return err
	}
	j.Rate.Period = fromMillis(rateMS)
	j.Args = args
	j.Limit.Duration = fromMillis(durMS)
	j.Limit.OnConflict = driver.OnConflict(conflict)
	return nil
}

// Collect scans every row of query with scan.
func Collect[T any](ctx context.Context, db DB, scan func(*sql.Rows) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return scanAll(rows, scan)
}

// scanAll scans every row of rows with scan, then closes them.
func scanAll[R interface {
	Next() bool
	Err() error
	Close() error
}, T any](rows R, scan func(R) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Column reads the first column of every row.
func Column[T any](ctx context.Context, db DB, query string, args ...any) ([]T, error) {
	return Collect(ctx, db, func(rows *sql.Rows) (v T, err error) {
		err = rows.Scan(&v)
		return v, err
	}, query, args...)
}

// Claims reads rows of sqltext.JobColumns, fence and claimed_at.
func (e *Executor) Claims(ctx context.Context, query string, args ...any) ([]*driver.Claim, error) {
	return Collect(ctx, e.db, func(rows *sql.Rows) (*driver.Claim, error) {
		c := &driver.Claim{}
		var claimedAt int64
		err := ScanJob(rows.Scan, &c.Job, &c.Fence, &claimedAt)
		c.ClaimedAt = FromMicros(claimedAt)
		return c, err
	}, query, args...)
}

// ClaimsIn reads the claims of query, its list bound to items.
func ClaimsIn[T any](ctx context.Context, x *Executor, query string, items []T) ([]*driver.Claim, error) {
	q, args := in(x, query, items)
	return x.Claims(ctx, q, args...)
}

// jobsIn reads the jobs of query, its list bound to ids.
func (e *Executor) jobsIn(ctx context.Context, query string, ids []int64) ([]*driver.Job, error) {
	q, args := in(e, query, ids)
	return Collect(ctx, e.db, func(rows *sql.Rows) (*driver.Job, error) {
		j := &driver.Job{}
		return j, ScanJob(rows.Scan, j)
	}, q, args...)
}

// found reports whether a one-row read found its row: a missing row is
// no error.
func found(err error) (bool, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// CloseRows closes rows read to the end and reports any error of theirs.
func CloseRows(rows *sql.Rows) error {
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	return rows.Close()
}
