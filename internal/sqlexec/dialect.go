package sqlexec

import (
	"context"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlhistory"
	"github.com/bqueue/bq/internal/sqltext"
)

// Dialect is what one database does its own way.
type Dialect interface {
	// Queries are the dialect's statements, the table prefix spliced in.
	Queries() *Queries

	// Encoding: Text, KeyArgs, CheckKey and NoTable.
	Encoding
	// KeyIndex is the one argument that matches a key's indexed column
	// (MySQL: its SHA-256).
	KeyIndex(key string) any

	// List returns query with its ListMarker made a list of n items, and
	// ListArgs the arguments that pass the items (MySQL: n placeholders
	// and the items; SQLite: one JSON array read with json_each).
	List(query string, n int) string
	ListArgs(items []any) []any
	// MaxList bounds the items of one list in a statement; 0: no bound.
	MaxList() int
	// ListRows binds a statement inserting one row per id: the id, then
	// consts.
	ListRows(query string, ids []int64, consts ...any) (string, []any)

	// Batch is how many of n rows the next multi-row INSERT takes; ids
	// says the caller reads the new rows' ids.
	Batch(n int, ids bool) int
	// InsertIDs runs a multi-row INSERT and returns the new rows' ids in
	// input order.
	InsertIDs(ctx context.Context, db DB, query string, args []any) ([]int64, error)

	// ListSpelling is how the dialect matches a key, a key range,
	// metadata and a tag in ListJobs (Time and Text are filled in by the
	// Executor).
	ListSpelling() sqltext.ListSpelling

	// History is the dialect's history statements (driver.HistoryStore).
	History() *sqlhistory.Queries
	// SearchKeys is Conn's.
	SearchKeys(prefix, suffix string) (query string, pattern any)

	// The steps the dialects take their own ways: locking reads that
	// skip what others hold (MySQL), or one writer whose processes also
	// show they live through beacons (SQLite).

	// Renew does what driver.Executor's SemaphoreRenewHeld says, inside x's
	// transaction.
	Renew(ctx context.Context, x *Executor, processID int64, at time.Time, renewBelow float64) error
	// ClaimListReapable, ClaimListReapableOfKey and ProcessDeleteDead do what the
	// driver.Executor methods of the same names say.
	ClaimListReapable(ctx context.Context, x *Executor, now time.Time, deadAfter time.Duration, max int) ([]*driver.Claim, error)
	ClaimListReapableOfKey(ctx context.Context, x *Executor, key string, now time.Time, silence time.Duration) ([]*driver.Claim, error)
	ProcessDeleteDead(ctx context.Context, x *Executor, now time.Time, deadAfter time.Duration) (int, error)
}

// ListMarker marks where a statement takes a list of items; the
// dialect's List expands it.
const ListMarker = "(/*list*/)"

// in binds query's list to items.
func in[T any](x *Executor, query string, items []T) (string, []any) {
	return x.d.List(query, len(items)), x.d.ListArgs(Anys(items))
}

// ExecIn runs the write statement query with its list bound to items,
// in as many statements as the dialect's MaxList needs, and returns the
// rows they changed.
func ExecIn[T any](ctx context.Context, x *Executor, query string, items []T) (int64, error) {
	return execInAfter(ctx, x, query, nil, items)
}

// execInAfter is ExecIn for a query whose list follows the arguments
// before: each of its statements passes them first.
func execInAfter[T any](ctx context.Context, x *Executor, query string, before []any, items []T) (int64, error) {
	var n int64
	for len(items) > 0 {
		size := len(items)
		if m := x.d.MaxList(); m > 0 {
			size = min(size, m)
		}
		q, args := in(x, query, items[:size])
		res, err := x.db.ExecContext(ctx, q, append(append([]any{}, before...), args...)...)
		if err != nil {
			return n, err
		}
		m, err := res.RowsAffected()
		if err != nil {
			return n, err
		}
		n += m
		items = items[size:]
	}
	return n, nil
}

// Anys returns list's items as []any.
func Anys[T any](list []T) []any {
	out := make([]any, len(list))
	for i, v := range list {
		out[i] = v
	}
	return out
}

// RowsMarker is where a statement takes its rows of bound values, made a
// VALUES list of Values by the code that runs it; a statement without it
// takes them at its end (an INSERT's head up to VALUES).
const RowsMarker = "/*rows*/"

// WithRows is query with n rows of width placeholders at its RowsMarker,
// or at its end when it has none.
func WithRows(query string, n, width int) string {
	if strings.Contains(query, RowsMarker) {
		return strings.Replace(query, RowsMarker, Values(n, width), 1)
	}
	return query + Values(n, width)
}

// Values returns n rows of a multi-row VALUES list, each of width
// placeholders.
func Values(n, width int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", width), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}
