package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// processQueries are the process rows' statements PostgreSQL spells its
// own way (the others are sqlexec.Shared's).
type processQueries struct {
	heartbeat, renewSems, deleteDeadProcesses string
}

func newProcessQueries(p func(string) string) processQueries {
	return processQueries{
		heartbeat: p(`UPDATE {p}processes SET last_heartbeat_at = $2, beating_since = $3 WHERE id = $1`),
		// Renew in key order, skipping rows someone holds: two renewals
		// never deadlock, and a skipped key is renewed next beat.
		renewSems: p(`
UPDATE {p}semaphores s SET expires_at = $2::timestamptz + s.duration_ms * interval '1 millisecond'
WHERE s.key IN (
	SELECT s2.key FROM {p}semaphores s2
	WHERE s2.key IN (
		SELECT j.concurrency_key FROM {p}claimed_executions c JOIN {p}jobs j ON j.id = c.job_id
		WHERE c.process_id = $1 AND j.concurrency_key IS NOT NULL
		UNION ALL -- a multi-key job's other keys
		SELECT jk.key FROM {p}claimed_executions c JOIN {p}job_keys jk ON jk.job_id = c.job_id
		WHERE c.process_id = $1)
	AND s2.expires_at < $2::timestamptz + s2.duration_ms * $3::float8 * interval '1 millisecond'
	ORDER BY s2.key
	FOR UPDATE SKIP LOCKED)`),
		deleteDeadProcesses: p(`DELETE FROM {p}processes p WHERE ` + deadFor(`greatest($2::bigint, p.dead_after_ms)`) + `
AND NOT EXISTS (SELECT 1 FROM {p}claimed_executions c WHERE c.process_id = p.id)`),
	}
}

// deadFor is the condition that process p (the row, aliased p) is dead at
// $1 after a silence of silenceMS: it has been silent that long, and
// another process's heartbeats landed without a gap for as long within
// that silence, so the database was writable and the silence is p's own
// (driver package doc, "Dead processes").
func deadFor(silenceMS string) string {
	return `p.last_heartbeat_at < $1::timestamptz - ` + silenceMS + ` * interval '1 millisecond'
	AND EXISTS (SELECT 1 FROM {p}processes q WHERE q.id <> p.id
		AND q.last_heartbeat_at - greatest(p.last_heartbeat_at, q.beating_since) > ` + silenceMS + ` * interval '1 millisecond')`
}

func (e *executor) Heartbeat(ctx context.Context, b driver.Beat) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.heartbeat, b.ProcessID, b.At, b.BeatingSince)
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

func (e *executor) RenewHeld(ctx context.Context, processID int64, at time.Time, renewBelow float64) error {
	if _, err := e.db.Exec(ctx, e.q.renewSems, processID, at, renewBelow); err != nil {
		return fmt.Errorf("renew semaphores: %w", err)
	}
	return nil
}

func (e *executor) DeleteDeadProcesses(ctx context.Context, now time.Time, deadAfter time.Duration) (int, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteDeadProcesses, now, deadAfter.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("delete dead processes: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
