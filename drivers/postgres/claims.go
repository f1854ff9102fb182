package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqltext"
)

// claimQueries are the claims' statements.
type claimQueries struct {
	claimUncapped, claimReady, claimAmong, claimHandOff, queueGate, lockQueueGate, hasReady, runningSlots string
	deleteClaim, completeClaims, completeDelete, lostClaims, lostClaimsOfKey                              string
}

func newClaimQueries(p func(string) string) claimQueries {
	return claimQueries{
		// Queues with a MaxActive policy are claimed by lifecycle.Claim's
		// transaction; this one-statement claim leaves them alone, and
		// paused queues too (lifecycle.Claim then reads their gate).
		claimUncapped: p(claimFrom(`
		AND NOT EXISTS (SELECT 1 FROM {p}policies c WHERE c.queue = $1 AND ` + sqltext.ClaimedByRule + `)
		AND NOT EXISTS (SELECT 1 FROM {p}paused_queues WHERE queue = $1)`)),
		claimReady: p(claimFrom("")),
		// A fair-share claim's pick: of the jobs $5 (at most $2), those
		// still ready, found by their keys (no order: it would walk the
		// ready line's index to find them). Both picks below probe each
		// id's ready row (readyOf) rather than filter the rows by the
		// ids (job_id = ANY($5)): given the queue too, a generic plan on
		// a table whose statistics lag (a fresh one, or one whose rows
		// all came and went since the last analyze) ANDed the queue's
		// index in, a walk of every ready row of the queue and of every
		// dead entry of its index (a pick of 5 ids among 20,000 ready
		// rows: 0.91 ms, 0.71 of it in the queue's index; joined, 0.25
		// ms; PostgreSQL 15, plan_cache_mode force_generic_plan).
		claimAmong: p(claimPicked(`
		SELECT r.job_id FROM unnest($5::bigint[]) AS x(id) CROSS JOIN LATERAL ` + readyOf(`x.id`, `job_id`) + ` r
		WHERE ` + keyNotPaused(`r.job_id`) + ` LIMIT $2
		FOR UPDATE OF r SKIP LOCKED`)),
		// A hand-off: of the jobs $5 promoted by this transaction, those
		// still ready in queue $1 with no rate key, from a queue with no
		// cap that is not paused.
		claimHandOff: p(claimPicked(`
		SELECT r.job_id FROM unnest($5::bigint[]) AS x(id) CROSS JOIN LATERAL ` + readyOf(`x.id`, `job_id, priority`) + ` r
		JOIN {p}jobs j ON j.id = r.job_id
		WHERE j.rate_key IS NULL AND ` + keyNotPaused(`r.job_id`) + `
		AND NOT EXISTS (SELECT 1 FROM {p}policies c WHERE c.queue = $1 AND ` + sqltext.ClaimedByRule + `)
		AND NOT EXISTS (SELECT 1 FROM {p}paused_queues WHERE queue = $1)
		ORDER BY r.priority DESC, r.job_id LIMIT $2
		FOR UPDATE OF r SKIP LOCKED`)),
		queueGate: p(`SELECT ` + gateOf + ` FROM {p}policies WHERE queue = $1`),
		// No row, no cap: coalesce(max()) reads 0 rather than no rows.
		lockQueueGate: p(`SELECT ` + gateOf + `
FROM (SELECT max_active, fair_share, key_weight FROM {p}policies WHERE queue = $1 FOR UPDATE) p`),
		hasReady: p(`SELECT EXISTS (SELECT 1 FROM {p}ready_executions WHERE queue = $1)`),
		// A claimed row carries its job's slots (migration 00028).
		runningSlots: p(`SELECT coalesce(sum(slots), 0) FROM {p}claimed_executions WHERE queue = $1`),
		deleteClaim:  p(`DELETE FROM {p}claimed_executions WHERE job_id = $1 AND fence = $2`),
		// One statement ends a batch of runs: only claims whose fence
		// still matches are deleted, and only their jobs finish.
		completeClaims: p(`
WITH done AS (
	DELETE FROM {p}claimed_executions c USING unnest($1::bigint[], $2::bigint[]) AS t(job_id, fence)
	WHERE c.job_id = ANY($1::bigint[]) AND c.job_id = t.job_id AND c.fence = t.fence RETURNING c.job_id, c.fence
)
UPDATE {p}jobs j SET attempt = j.attempt + 1, finished_at = $3 FROM done WHERE j.id = done.job_id
RETURNING j.id, done.fence, j.has_dependents`),
		completeDelete: p(`
WITH done AS (
	DELETE FROM {p}claimed_executions c USING unnest($1::bigint[], $2::bigint[]) AS t(job_id, fence)
	WHERE c.job_id = ANY($1::bigint[]) AND c.job_id = t.job_id AND c.fence = t.fence RETURNING c.job_id, c.fence
)
DELETE FROM {p}jobs j USING done WHERE j.id = done.job_id RETURNING j.id, done.fence, j.has_dependents`),
		lostClaims: p(`
SELECT ` + jobColumns + `, c.fence, c.claimed_at
FROM {p}claimed_executions c
JOIN {p}jobs j ON j.id = c.job_id
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE p.id IS NULL OR (` + deadFor(`greatest($2::bigint, p.dead_after_ms)`) + `)
ORDER BY c.job_id LIMIT $3
FOR UPDATE OF c SKIP LOCKED`),
		lostClaimsOfKey: p(`
SELECT ` + jobColumns + `, c.fence, c.claimed_at
FROM {p}jobs j
JOIN {p}claimed_executions c ON c.job_id = j.id
LEFT JOIN {p}processes p ON p.id = c.process_id
WHERE j.id IN (SELECT id FROM {p}jobs WHERE concurrency_key = $2 AND finished_at IS NULL
		UNION ALL SELECT job_id FROM {p}job_keys WHERE key = $2)
	AND j.finished_at IS NULL
	AND (p.id IS NULL OR (` + deadFor(`greatest($3::bigint, j.concurrency_duration_ms, 3 * p.heartbeat_interval_ms)`) + `))
ORDER BY c.job_id
FOR UPDATE OF c SKIP LOCKED`),
	}
}

// readyOf is the ready row of job id in queue $1 (cols of it), as a
// LATERAL subquery: a probe of the primary key for each id, which LIMIT
// 1 keeps the planner from turning into a join. Joined, the picks by id
// were planned, on tables whose statistics lag, as a walk of the queue's
// rows in an index led by the queue (ready_key's, migration 00027: 11,923
// entries, dead ones included, for a pick of 48; 1.3 ms a claim against
// 0.8), hashed against the ids.
func readyOf(id, cols string) string {
	return `(SELECT ` + cols + ` FROM {p}ready_executions WHERE job_id = ` + id + ` AND queue = $1 LIMIT 1)`
}

// claimFrom is the claim of up to $2 ready jobs of queue $1 for process $3
// at $4; guard filters the ready rows. Each row is taken by its key (=
// ANY of an array), never by a join: its plan is then the same whatever
// the LIMIT, so the one-statement claim can run its generic plan
// (collectGeneric), where a join would be planned to hash a tenth of the
// ready table.
func claimFrom(guard string) string {
	return claimPicked(`
		SELECT job_id FROM {p}ready_executions WHERE queue = $1` + guard + `
		AND ` + keyNotPaused(`{p}ready_executions.job_id`) + `
		ORDER BY priority DESC, job_id LIMIT $2
		FOR UPDATE SKIP LOCKED`)
}

// claimPicked claims the ready jobs pick selects (queue $1, process $3,
// at $4) and returns them with their fences.
func claimPicked(pick string) string {
	return `
WITH taken AS (
	DELETE FROM {p}ready_executions r WHERE r.job_id = ANY(ARRAY(` + pick + `))
	RETURNING r.job_id, r.concurrency_key, r.slots
), claimed AS (
	INSERT INTO {p}claimed_executions (job_id, queue, process_id, claimed_at, concurrency_key, slots)
	SELECT job_id, $1, $3, $4, concurrency_key, slots FROM taken RETURNING job_id, fence
)
SELECT ` + jobColumns + `, c.fence
FROM {p}jobs j JOIN claimed c ON c.job_id = j.id
WHERE j.id = ANY(ARRAY(SELECT job_id FROM claimed))
ORDER BY j.priority DESC, j.id`
}

// keyNotPaused is sqltext.KeyNotPaused of job id, its correlated part the
// function job_key_paused (migration 00018).
func keyNotPaused(id string) string { return sqltext.KeyNotPausedCall(id, "job_key_paused") }

// gateOf reads the gate of queue $1 from its policy rows (none or one).
const gateOf = `coalesce(max(max_active), 0), ` + isPaused + `, coalesce(bool_or(fair_share), false), coalesce(max(key_weight), 0)`

// isPaused reads whether queue $1 is paused.
const isPaused = `EXISTS (SELECT 1 FROM {p}paused_queues WHERE queue = $1)`

// claims reads rows of jobColumns and fence, then claimed_at if the rows
// have it; without it the claims were made at now.
func claims(ctx context.Context, db dbtx, withClaimedAt bool, now time.Time, query string, args ...any) ([]*driver.Claim, error) {
	return collect(ctx, db, claimRow(withClaimedAt, now), query, args...)
}

// claimRow reads a row of claims.
func claimRow(withClaimedAt bool, now time.Time) pgx.RowToFunc[*driver.Claim] {
	return func(r pgx.CollectableRow) (*driver.Claim, error) {
		c := &driver.Claim{ClaimedAt: now}
		extra := []any{&c.Fence}
		if withClaimedAt {
			extra = append(extra, &c.ClaimedAt)
		}
		return c, scanJob(r, &c.Job, extra...)
	}
}

// Claim claims from an uncapped queue in one statement, outside any
// transaction; from a capped or paused one by the rule's transaction.
func (d *engine) Claim(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	ex := d.Exec().(*executor)
	return driver.ClaimWithin(ctx, d, p, driver.ClaimWays{OneStatement: ex.claimUncapped, ByRule: &d.byRule})
}

// claimUncapped is the one-statement claim: it leaves queues with a
// MaxActive or a pause alone, so uncapped queues pay two index probes
// for those features.
func (e *executor) claimUncapped(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	return collectGeneric(ctx, e, claimRow(false, p.Now), e.q.claimUncapped, p.Queue, p.Max, p.ProcessID, p.Now)
}

func (e *executor) ReadyClaimHandOff(ctx context.Context, p driver.HandOffParams) ([]*driver.Claim, error) {
	if len(p.IDs) == 0 || p.Max <= 0 {
		return nil, nil
	}
	return claims(ctx, e.db, false, p.Now, e.q.claimHandOff, p.Queue, p.Max, p.ProcessID, p.Now, p.IDs)
}

// ReadyClaimHandOffLater queues the hand-off's claim in bq's pipelined
// transaction (driver.ClaimQueuer): the last statement of a completion
// batch, it goes out with the COMMIT, one round trip for both.
func (e *executor) ReadyClaimHandOffLater(ctx context.Context, p driver.HandOffParams, into *[]*driver.Claim) error {
	if len(p.IDs) == 0 || p.Max <= 0 {
		return nil
	}
	return e.claimLater(ctx, p.Now, into, e.q.claimHandOff, p.Queue, p.Max, p.ProcessID, p.Now, p.IDs)
}

// ReadyClaimLater queues ReadyClaim's claim (driver.ClaimQueuer): a fair
// claim's last statement, it goes out with the COMMIT.
func (e *executor) ReadyClaimLater(ctx context.Context, p driver.ClaimParams, into *[]*driver.Claim) error {
	if p.Among != nil {
		return e.claimLater(ctx, p.Now, into, e.q.claimAmong, p.Queue, p.Max, p.ProcessID, p.Now, p.Among)
	}
	return e.claimLater(ctx, p.Now, into, e.q.claimReady, p.Queue, p.Max, p.ProcessID, p.Now)
}

// claimLater queues a claim statement whose rows are jobColumns and the
// fence, made at now, and sets *into to them once it has gone out.
func (e *executor) claimLater(ctx context.Context, now time.Time, into *[]*driver.Claim, query string, args ...any) error {
	return e.queueRead(ctx, query, args, func(rows pgx.Rows) (err error) {
		*into, err = pgx.CollectRows(rows, claimRow(false, now))
		return err
	})
}

func (e *executor) ReadyClaim(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	if p.Among != nil {
		return claims(ctx, e.db, false, p.Now, e.q.claimAmong, p.Queue, p.Max, p.ProcessID, p.Now, p.Among)
	}
	return claims(ctx, e.db, false, p.Now, e.q.claimReady, p.Queue, p.Max, p.ProcessID, p.Now)
}

func (e *executor) ReadyExists(ctx context.Context, queue string) (bool, error) {
	var any bool
	err := e.db.QueryRow(ctx, e.q.hasReady, queue).Scan(&any)
	return any, err
}

// QueueGateGet locks the policy row only inside a transaction: outside one
// (the pool) a lock would end with its statement.
func (e *executor) QueueGateGet(ctx context.Context, queue string) (driver.Gate, error) {
	query := e.q.lockQueueGate
	if _, pool := e.db.(*pgxpool.Pool); pool {
		query = e.q.queueGate
	}
	var g driver.Gate
	if err := e.db.QueryRow(ctx, query, queue).Scan(&g.MaxActive, &g.Paused, &g.Fair, &g.Weight); err != nil {
		return g, fmt.Errorf("read the cap and pause of queue %q: %w", queue, err)
	}
	return g, nil
}

// QueueGateGetLater queues QueueGateGet's locking read (driver.ClaimQueuer):
// it goes out with the fair claim's read of the ready jobs.
func (e *executor) QueueGateGetLater(ctx context.Context, queue string, into *driver.Gate) error {
	return e.queueRead(ctx, e.q.lockQueueGate, []any{queue}, func(rows pgx.Rows) error {
		if !rows.Next() {
			return fmt.Errorf("read the cap and pause of queue %q: no row", queue)
		}
		return rows.Scan(&into.MaxActive, &into.Paused, &into.Fair, &into.Weight)
	})
}

func (e *executor) RunningSlots(ctx context.Context, queue string) (int, error) {
	var n int
	if err := e.db.QueryRow(ctx, e.q.runningSlots, queue).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the slots of queue %q's running jobs: %w", queue, err)
	}
	return n, nil
}

func (e *executor) ClaimCompleteMany(ctx context.Context, claims []*driver.Claim, keep bool, now time.Time) ([]driver.Ended, error) {
	query, args := e.completeQuery(claims, keep, now)
	matched, err := collectGeneric(ctx, e, scanEnded, query, args...)
	if err != nil {
		return nil, fmt.Errorf("complete %d jobs: %w", len(claims), err)
	}
	return matched, nil
}

// ClaimCompleteRelease ends the claims and releases keys in one round
// trip (driver.CompleteReleaser): in bq's pipelined transaction the
// completion is queued, and goes out with the release's locks and its
// statement.
func (e *executor) ClaimCompleteRelease(ctx context.Context, claims []*driver.Claim, keep bool, keys []string, counts []int, now time.Time) ([]driver.Ended, []driver.Promotion, error) {
	query, args := e.completeQuery(claims, keep, now)
	var matched []driver.Ended
	err := e.queueRead(ctx, query, args, func(rows pgx.Rows) (err error) {
		matched, err = pgx.CollectRows(rows, scanEnded)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("complete %d jobs: %w", len(claims), err)
	}
	promoted, err := e.SemaphoreReleaseMany(ctx, keys, counts, now)
	if err != nil {
		return nil, nil, err
	}
	return matched, promoted, nil
}

// completeQuery is the statement that ends claims (completeClaims, or
// completeDelete without keep) and its arguments.
func (e *executor) completeQuery(claims []*driver.Claim, keep bool, now time.Time) (string, []any) {
	ids, fences := make([]int64, len(claims)), make([]int64, len(claims))
	for i, c := range claims {
		ids[i], fences[i] = c.ID, c.Fence
	}
	if !keep {
		return e.q.completeDelete, []any{ids, fences}
	}
	return e.q.completeClaims, []any{ids, fences, now}
}

// scanEnded reads a row of completeClaims or completeDelete.
func scanEnded(row pgx.CollectableRow) (f driver.Ended, err error) {
	err = row.Scan(&f.JobID, &f.Fence, &f.HasDependents)
	return f, err
}

func (e *executor) ClaimDelete(ctx context.Context, jobID, fence int64) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteClaim, jobID, fence)
	if err != nil {
		return false, fmt.Errorf("delete claim of job %d: %w", jobID, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (e *executor) ClaimListReapable(ctx context.Context, now time.Time, deadAfter time.Duration, max int) ([]*driver.Claim, error) {
	out, err := claims(ctx, e.db, true, time.Time{}, e.q.lostClaims, now, deadAfter.Milliseconds(), max)
	if err != nil {
		return nil, fmt.Errorf("find claims of dead processes: %w", err)
	}
	return out, nil
}

func (e *executor) ClaimListReapableOfKey(ctx context.Context, key string, now time.Time, silence time.Duration) ([]*driver.Claim, error) {
	out, err := claims(ctx, e.db, true, time.Time{}, e.q.lostClaimsOfKey, now, key, silence.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("find lost claims of %q: %w", key, err)
	}
	return out, nil
}
