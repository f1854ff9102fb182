package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// forceGenericSQL makes the statement after it in the same implicit
// transaction (one pgx batch) use its cached generic plan, planned
// without sequential scans (see keyPlans).
const forceGenericSQL = "select set_config('plan_cache_mode', 'force_generic_plan', true), " + keyPlans

// keyPlans turns sequential scans off (enable_seqscan) until the
// transaction ends. Every statement of bq's hot path takes its rows by
// key, so its right plan is an index's whatever the tables' size; but a
// connection plans a statement once, generically, and keeps that plan
// until something invalidates it, which on a fresh deployment is the
// first autoanalyze, up to a minute (autovacuum_naptime) after the tables
// were created, and never with autovacuum off. Planned on near-empty
// tables, which PostgreSQL takes for 10 pages until they are first
// analyzed, the claim read every row of bq_jobs to find the jobs it had
// claimed (a hash join over a sequential scan) and kept doing so as the
// table grew: 0.3 ms a claim at the start of a steady run, 13 ms after a
// minute at 500 jobs/s (bench/matrix/notes.md, "A fresh deployment's first
// minute"). Planned with sequential scans off, the hot statements use
// their indexes from the first call. It is a planner setting, not a
// hint: a statement with no index to use still scans.
//
// It turns JIT compilation off too (jit): a sequential scan planned with
// enable_seqscan off is costed at 10^10, far past jit_above_cost, and
// PostgreSQL then compiled the statement at each run (100 ms for a fair
// claim's read of a small table, measured with auto_explain, where the
// read itself took 3 ms).
const keyPlans = "set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)"

// keyPlansSQL runs keyPlans alone (the first statement of a transaction
// bq owns, see pipeTx).
const keyPlansSQL = "select " + keyPlans

// genericPlans is whether the server takes plan_cache_mode (PostgreSQL
// 12 and later); it turns false at the first refusal.
type genericPlans struct{ off atomic.Bool }

// collectGeneric is collect for the hot path's statements outside a
// transaction (a claim, a batch of completions): it runs query with its
// generic plan, sent in one round trip behind a SET LOCAL of
// plan_cache_mode. Left to choose, PostgreSQL plans a statement whose
// LIMIT is a parameter anew at every call, since its generic plan costs a
// tenth of the table; that planning took 0.4 to 0.6 ms a call, as long as
// running it. query must be written so its generic plan is as good as any
// (rows taken by key, = ANY of an array, never by a join the planner may
// hash over a whole table). Inside a transaction, or on a server without
// plan_cache_mode, it is collect.
func collectGeneric[T any](ctx context.Context, e *executor, scan pgx.RowToFunc[T], query string, args ...any) ([]T, error) {
	pool, ok := e.db.(*pgxpool.Pool)
	if !ok || e.plans == nil || e.plans.off.Load() {
		return collect(ctx, e.db, scan, query, args...)
	}
	b := &pgx.Batch{}
	b.Queue(forceGenericSQL)
	var out []T
	b.Queue(query, args...).Query(func(rows pgx.Rows) error {
		var err error
		out, err = pgx.CollectRows(rows, scan)
		return err
	})
	err := pool.SendBatch(ctx, b).Close()
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == "42704" { // unrecognized configuration parameter
		// Nothing ran: the batch is one transaction, and its first
		// statement failed.
		e.plans.off.Store(true)
		return collect(ctx, e.db, scan, query, args...)
	}
	return out, err
}

// genericOnSQL and genericOffSQL bracket statements of bq's pipelined
// transaction that are to run their generic plans (executor.generic):
// the first keeps the transaction's plan_cache_mode in a setting of bq's
// own and forces generic plans, the second puts the kept value back.
// Both are local to the transaction.
const (
	genericOnSQL  = "select set_config('bq.plan_cache_mode', current_setting('plan_cache_mode'), true), set_config('plan_cache_mode', 'force_generic_plan', true)"
	genericOffSQL = "select set_config('plan_cache_mode', current_setting('bq.plan_cache_mode'), true)"
)

// generic runs run, whose statements go out in bq's pipelined
// transaction, with their generic plans: both switches are queued, so
// they add no round trip. Elsewhere, or on a server without
// plan_cache_mode (before PostgreSQL 12), it is run.
func (e *executor) generic(run func() error) error {
	tx, ok := e.db.(*pipeTx)
	if !ok || !takesPlanCacheMode(tx.conn.Conn().PgConn()) {
		return run()
	}
	tx.queue(genericOnSQL, nil)
	err := run()
	tx.queue(genericOffSQL, nil)
	return err
}

// takesPlanCacheMode is whether the server of c has plan_cache_mode
// (PostgreSQL 12 and later), from the version it reported at connect.
func takesPlanCacheMode(c *pgconn.PgConn) bool {
	major, _, _ := strings.Cut(c.ParameterStatus("server_version"), ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 12
}
