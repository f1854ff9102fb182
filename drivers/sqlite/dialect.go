package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/internal/sqlhistory"
	"github.com/bqueue/bq/internal/sqltext"
)

// dialect is SQLite's sqlexec.Dialect.
type dialect struct {
	d   *engine // for the processes' beacons
	q   *sqlexec.Queries
	own *ownQueries

	history sqlhistory.Queries // history.go
}

func newDialect(d *engine, prefix string) *dialect {
	q, own := newQueries(prefix)
	return &dialect{d: d, q: q, own: own, history: newHistoryQueries(sqltext.Spelling(prefix))}
}

func (dl *dialect) Queries() *sqlexec.Queries { return dl.q }

func (dl *dialect) Text(s string) any               { return s }
func (dl *dialect) KeyArgs(key string) []any        { return []any{key} }
func (dl *dialect) KeyIndex(key string) any         { return key }
func (dl *dialect) CheckKey(string) error           { return nil }
func (dl *dialect) MaxList() int                    { return 0 }
func (dl *dialect) List(query string, _ int) string { return query } // idList: spliced in by newQueries
func (dl *dialect) ListArgs(items []any) []any      { return []any{jsonOf(items)} }
func (dl *dialect) NoTable(err error) bool          { return strings.Contains(err.Error(), "no such table") }
func (dl *dialect) ListRows(query string, ids []int64, consts ...any) (string, []any) {
	return query, append(slices.Clone(consts), jsonOf(ids))
}

// jsonOf encodes v for json_each; v is made of strings and numbers only.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// maxInsertRows bounds the rows of one multi-row INSERT. Counts are cut
// into powers of two up to it (1000 = 7×128 + 64 + 32 + 8), so a handful
// of statement texts serve every count and each stays prepared.
const maxInsertRows = 128

func (dl *dialect) Batch(n int, _ bool) int {
	size := maxInsertRows
	for size > n {
		size /= 2
	}
	return size
}

// InsertIDs returns the new rowids in input order: SQLite assigns them
// increasing in the order of the VALUES list, under the write lock, so
// sorting the RETURNING rows recovers that order.
func (dl *dialect) InsertIDs(ctx context.Context, db sqlexec.DB, query string, args []any) ([]int64, error) {
	ids, err := sqlexec.Column[int64](ctx, db, query+" RETURNING id", args...)
	slices.Sort(ids)
	return ids, err
}

// Renew renews them in one statement: the write lock is the lock.
func (dl *dialect) Renew(ctx context.Context, x *sqlexec.Executor, processID int64, at time.Time, renewBelow float64) error {
	_, err := x.DB().ExecContext(ctx, dl.own.renewSems, sqlexec.Micros(at), processID, renewBelow)
	return err
}

func (dl *dialect) ClaimListReapable(ctx context.Context, x *sqlexec.Executor, now time.Time, deadAfter time.Duration, max int) ([]*driver.Claim, error) {
	dead, err := dl.d.deadProcesses(ctx, x.DB(), now, deadAfter)
	if err != nil {
		return nil, fmt.Errorf("find dead processes: %w", err)
	}
	return x.Claims(ctx, dl.own.claimsOfDead, jsonOf(dead), max)
}

// ClaimListReapableOfKey keeps the claims of processes gone, or silent in the
// database and by their beacons.
func (dl *dialect) ClaimListReapableOfKey(ctx context.Context, x *sqlexec.Executor, key string, now time.Time, silence time.Duration) ([]*driver.Claim, error) {
	rows, err := x.DB().QueryContext(ctx, dl.own.lostClaimsOfKey, sqlexec.Micros(now), key, silence.Milliseconds())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.Claim
	for rows.Next() {
		c := &driver.Claim{}
		var claimedAt, processID, silenceMS int64
		if err := sqlexec.ScanJob(rows.Scan, &c.Job, &c.Fence, &claimedAt, &processID, &silenceMS); err != nil {
			return nil, err
		}
		c.ClaimedAt = sqlexec.FromMicros(claimedAt)
		if processID != 0 && dl.d.aliveByBeacon(processID, now, time.Duration(silenceMS)*time.Millisecond) {
			continue
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ProcessDeleteDead deletes the dead processes that hold no claims,
// then their beacons.
func (dl *dialect) ProcessDeleteDead(ctx context.Context, x *sqlexec.Executor, now time.Time, deadAfter time.Duration) (int, error) {
	var deleted []int64
	err := x.Atomic(ctx, func(x *sqlexec.Executor) error {
		dead, err := dl.d.deadProcesses(ctx, x.DB(), now, deadAfter)
		if err != nil || len(dead) == 0 {
			return err
		}
		deleted, err = sqlexec.Column[int64](ctx, x.DB(), dl.own.deleteProcesses, jsonOf(dead))
		return err
	})
	if err != nil {
		return 0, err
	}
	dl.d.removeBeacons(deleted)
	return len(deleted), nil
}
