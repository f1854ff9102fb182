package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestHotPlansUseIndexes: on fresh tables, never analyzed (PostgreSQL
// takes them for 10 pages), the claim and the batch of completions are
// planned to read their rows by index, both in their one-statement round
// trip and in a transaction bq owns; planned with sequential scans, the
// claim read every row of bq_jobs and kept that plan as the table grew
// (keyPlans). The setting ends with its transaction.
func TestHotPlansUseIndexes(t *testing.T) {
	d := testDriver(t)
	ctx := context.Background()
	e := d.Exec().(*executor)
	explain := func(db dbtx, query string, args ...any) string {
		t.Helper()
		var rows []string
		var err error
		if db == nil {
			rows, err = collectGeneric(ctx, e, pgx.RowTo[string], "EXPLAIN (COSTS OFF) "+query, args...)
		} else {
			rows, err = collect(ctx, db, pgx.RowTo[string], "EXPLAIN (COSTS OFF) "+query, args...)
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(rows, "\n")
	}
	now := time.Now()
	claim := explain(nil, e.q.claimUncapped, "q", 10, int64(1), now)
	complete := explain(nil, e.q.completeClaims, []int64{1, 2}, []int64{1, 2}, now)

	tx, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	txdb := tx.(*txExecutor).db
	claimTx := explain(txdb, e.q.claimReady, "q", 10, int64(1), now)
	var inTx, jitInTx string
	if err := txdb.QueryRow(ctx, "SELECT current_setting('enable_seqscan'), current_setting('jit')").Scan(&inTx, &jitInTx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	for name, plan := range map[string]string{"claim": claim, "claim in a transaction": claimTx, "completion": complete} {
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s on fresh tables scans a table:\n%s", name, plan)
		}
	}
	for name, plan := range map[string]string{"claim": claim, "claim in a transaction": claimTx} {
		if !strings.Contains(plan, "bq_jobs_pkey") || !strings.Contains(plan, "bq_ready_executions_pkey") {
			t.Errorf("%s does not read bq_jobs and bq_ready_executions by their keys:\n%s", name, plan)
		}
	}
	var after string
	if err := d.pool.QueryRow(ctx, "SELECT current_setting('enable_seqscan')").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if inTx != "off" || after != "on" {
		t.Errorf("enable_seqscan: %q in bq's transaction, %q after it; want off, then the session's on", inTx, after)
	}
	// A scan costed past jit_above_cost by enable_seqscan off is not
	// compiled at each run.
	if jitInTx != "off" {
		t.Errorf("jit: %q in bq's transaction, want off", jitInTx)
	}
}

// TestGenericBracketsItsStatements: in bq's pipelined transaction, the
// statements executor.generic runs use their generic plans, and the
// transaction's own plan_cache_mode (here one it set) is back for what
// follows.
func TestGenericBracketsItsStatements(t *testing.T) {
	d := testDriver(t)
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	e := tx.(*txExecutor)
	if _, err := e.db.Exec(ctx, "SET LOCAL plan_cache_mode = force_custom_plan"); err != nil {
		t.Fatal(err)
	}
	mode := func() string {
		t.Helper()
		var m string
		if err := e.db.QueryRow(ctx, "SELECT current_setting('plan_cache_mode')").Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	var inside string
	if err := e.generic(func() error { inside = mode(); return nil }); err != nil {
		t.Fatal(err)
	}
	if after := mode(); inside != "force_generic_plan" || after != "force_custom_plan" {
		t.Errorf("plan_cache_mode: %q inside generic, %q after it; want force_generic_plan, then force_custom_plan", inside, after)
	}
}
