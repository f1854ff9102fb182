package mysql

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/internal/sqlhistory"
	"github.com/bqueue/bq/internal/sqltext"
)

// MaxKeyBytes is the longest concurrency key (Group + "/" + Key) the MySQL
// driver stores: 4096 bytes, 1,024 characters of any script. A longer
// key is refused at enqueue, never truncated. bq.MaxKeyBytes (2048), checked
// before any driver is reached, is the limit users meet; this one is a
// backstop.
const MaxKeyBytes = 4096

// maxRows bounds the rows of one multi-row statement, keeping it well
// under the 65,535 placeholders a prepared statement may have.
const maxRows = 1000

// dialect is MySQL's sqlexec.Dialect.
type dialect struct {
	q   *sqlexec.Queries
	own *ownQueries
	srv serverCaps

	history sqlhistory.Queries // history.go
}

func newDialect(prefix string, srv serverCaps) *dialect {
	q, own := newQueries(prefix)
	return &dialect{q: q, own: own, srv: srv, history: newHistoryQueries(sqltext.Spelling(prefix))}
}

func (d *dialect) Queries() *sqlexec.Queries { return d.q }

// hash is the SHA-256 of key, the column keys are indexed by; the
// schema's generated columns and CHECK compute the same.
func hash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// Text passes bytes: the columns are VARBINARY, so no character set can
// alter them.
func (d *dialect) Text(s string) any               { return []byte(s) }
func (d *dialect) KeyArgs(key string) []any        { return []any{hash(key), []byte(key)} }
func (d *dialect) KeyIndex(key string) any         { return hash(key) }
func (d *dialect) CheckKey(key string) error       { return checkKey(key) }
func (d *dialect) MaxList() int                    { return maxRows }
func (d *dialect) List(query string, n int) string { return in(query, max(n, 1)) }

// ListArgs passes the items; an empty IN list is not SQL, so none is
// (NULL), which matches nothing.
func (d *dialect) ListArgs(items []any) []any {
	if len(items) == 0 {
		return []any{nil}
	}
	return items
}

// ListRows binds a multi-row VALUES list.
func (d *dialect) ListRows(query string, ids []int64, consts ...any) (string, []any) {
	args := make([]any, 0, len(ids)*(1+len(consts)))
	for _, id := range ids {
		args = append(append(args, id), consts...)
	}
	return query + sqlexec.Values(len(ids), 1+len(consts)), args
}

// Batch inserts up to maxRows rows a statement, whether or not their ids
// are read (InsertIDs).
func (d *dialect) Batch(n int, _ bool) int { return min(n, maxRows) }

// InsertIDs runs a multi-row INSERT and reads its rows' ids in input
// order: on MariaDB from RETURNING, in the order the rows went in; on
// MySQL, which has none, from the first row's id (LastInsertId) and the
// session's auto_increment_increment. A multi-row INSERT ... VALUES is a
// "simple insert", whose rows InnoDB counts before it starts and whose
// ids it reserves in one go under every innodb_autoinc_lock_mode (only
// INSERT ... SELECT and LOAD DATA, whose rows are not known in advance,
// reserve them piecemeal), so they run from the first id in steps of the
// increment. It must run in a transaction (or on one connection): the
// increment is read on the connection that inserted.
func (d *dialect) InsertIDs(ctx context.Context, db sqlexec.DB, query string, args []any) ([]int64, error) {
	return d.insertIDs(ctx, db, query, args, "id")
}

// insertIDs is InsertIDs for a table whose AUTO_INCREMENT column is
// column.
func (d *dialect) insertIDs(ctx context.Context, db sqlexec.DB, query string, args []any, column string) ([]int64, error) {
	if d.srv.returning {
		return sqlexec.Column[int64](ctx, db, query+" RETURNING "+column, args...)
	}
	res, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	first, err := res.LastInsertId()
	if err != nil {
		return nil, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, err
	}
	step := int64(1)
	if n > 1 {
		if err := db.QueryRowContext(ctx, "SELECT @@SESSION.auto_increment_increment").Scan(&step); err != nil {
			return nil, fmt.Errorf("read auto_increment_increment: %w", err)
		}
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = first + int64(i)*step
	}
	return ids, nil
}

// errNoSuchTable is ER_NO_SUCH_TABLE.
const errNoSuchTable = 1146

func (d *dialect) NoTable(err error) bool {
	myErr := (*gomysql.MySQLError)(nil)
	return errors.As(err, &myErr) && myErr.Number == errNoSuchTable
}

// checkKey refuses a key too long for the key columns.
func checkKey(key string) error {
	if len(key) > MaxKeyBytes {
		start := key[:32]
		for !utf8.ValidString(start) && len(start) > 28 {
			start = start[:len(start)-1] // do not cut a character in two
		}
		return fmt.Errorf("concurrency key %q... is %d bytes long: the MySQL driver stores keys of at most %d bytes (Group + \"/\" + Key); use a shorter key, e.g. a hash of the long one",
			start, len(key), MaxKeyBytes)
	}
	return nil
}

// Renew reads the keys the process's claims hold, then locks those of
// their semaphores that are due, skipping rows others hold, and renews
// them.
func (d *dialect) Renew(ctx context.Context, x *sqlexec.Executor, processID int64, now time.Time, renewBelow float64) error {
	keys, err := sqlexec.Column[[]byte](ctx, x.DB(), d.own.heldKeys, processID, processID)
	if err != nil || len(keys) == 0 {
		return err
	}
	at := sqlexec.Micros(now)
	renew, err := sqlexec.Column[[]byte](ctx, x.DB(), in(d.own.pickRenewable, len(keys)), append(sqlexec.Anys(keys), at, renewBelow)...)
	if err != nil || len(renew) == 0 {
		return err
	}
	_, err = x.DB().ExecContext(ctx, in(d.own.renewSems, len(renew)), append([]any{at}, sqlexec.Anys(renew)...)...)
	return err
}

func (d *dialect) ClaimListReapable(ctx context.Context, x *sqlexec.Executor, now time.Time, deadAfter time.Duration, max int) ([]*driver.Claim, error) {
	ms := deadAfter.Milliseconds()
	return d.lockLost(ctx, x, d.own.lostClaims, sqlexec.Micros(now), ms, ms, max)
}

func (d *dialect) ClaimListReapableOfKey(ctx context.Context, x *sqlexec.Executor, key string, now time.Time, silence time.Duration) ([]*driver.Claim, error) {
	ms := silence.Milliseconds()
	return d.lockLost(ctx, x, d.own.lostClaimsOfKey, hash(key), hash(key), sqlexec.Micros(now), ms, ms)
}

// lockLost locks the claims whose fences the query lists, skipping those
// someone holds, and reads them.
func (d *dialect) lockLost(ctx context.Context, x *sqlexec.Executor, query string, args ...any) ([]*driver.Claim, error) {
	var claims []*driver.Claim
	err := x.Atomic(ctx, func(x *sqlexec.Executor) error {
		claims = nil
		fences, err := sqlexec.Column[int64](ctx, x.DB(), query, args...)
		if err != nil || len(fences) == 0 {
			return err
		}
		locked, err := sqlexec.Column[int64](ctx, x.DB(), in(d.own.lockClaims, len(fences)), sqlexec.Anys(fences)...)
		if err != nil || len(locked) == 0 {
			return err
		}
		claims, err = sqlexec.ClaimsIn(ctx, x, d.own.selectLockedClaims, locked)
		return err
	})
	return claims, err
}

func (d *dialect) ProcessDeleteDead(ctx context.Context, x *sqlexec.Executor, now time.Time, deadAfter time.Duration) (int, error) {
	var n int64
	err := x.Atomic(ctx, func(x *sqlexec.Executor) error {
		n = 0
		ms := deadAfter.Milliseconds()
		seen, err := processBeats(ctx, x.DB(), d.own.deadProcesses, sqlexec.Micros(now), ms, ms)
		if err != nil || len(seen) == 0 {
			return err
		}
		ids := make([]int64, 0, len(seen))
		for id := range seen {
			ids = append(ids, id)
		}
		locked, err := processBeats(ctx, x.DB(), in(d.own.lockProcesses, len(ids)), sqlexec.Anys(ids)...)
		if err != nil {
			return err
		}
		// Only those that have not beaten since they were found dead.
		ids = ids[:0]
		for id, beat := range locked {
			if beat == seen[id] {
				ids = append(ids, id)
			}
		}
		n, err = sqlexec.ExecIn(ctx, x, d.own.deleteProcesses, ids)
		return err
	})
	return int(n), err
}

// processBeats reads (id, last_heartbeat_at) rows.
func processBeats(ctx context.Context, db sqlexec.DB, query string, args ...any) (map[int64]int64, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var id, beat int64
		if err := rows.Scan(&id, &beat); err != nil {
			return nil, err
		}
		out[id] = beat
	}
	return out, rows.Err()
}
