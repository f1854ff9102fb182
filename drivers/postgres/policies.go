package postgres

import (
	"context"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
)

// policyQueries are the policies' statements PostgreSQL spells its own
// way (the others are sqlexec.Shared's).
type policyQueries struct {
	policyKeys, latestJobLimit string
}

func newPolicyQueries(p func(string) string) policyQueries {
	return policyQueries{
		// Every key of the queue's live jobs, a multi-key job's More too
		// (more_keys leaves "to" out when 0), on the same scan as before.
		policyKeys: p(`
SELECT DISTINCT k.key FROM {p}jobs j CROSS JOIN LATERAL (
	SELECT j.concurrency_key AS key, j.concurrency_limit AS lim
	UNION ALL
	SELECT m->>'key', coalesce((m->>'to')::int, 0) FROM jsonb_array_elements(coalesce(j.more_keys, '[]')::jsonb) m
) k
WHERE j.queue = $1 AND j.concurrency_key IS NOT NULL AND j.finished_at IS NULL AND k.lim = 0 ORDER BY 1`),
		// The newest live job naming the key, first or in job_keys.
		latestJobLimit: p(`SELECT ` + jobColumns + ` FROM {p}jobs j WHERE j.id = (SELECT max(id) FROM (
	(SELECT id FROM {p}jobs WHERE concurrency_key = $1 AND finished_at IS NULL ORDER BY id DESC LIMIT 1)
	UNION ALL
	(SELECT jk.job_id FROM {p}job_keys jk JOIN {p}jobs k ON k.id = jk.job_id
	WHERE jk.key = $1 AND k.finished_at IS NULL ORDER BY jk.job_id DESC LIMIT 1)) t)`),
	}
}

func (e *executor) PolicyKeys(ctx context.Context, queue string) ([]string, error) {
	return e.keys(ctx, "policy-limited", e.q.policyKeys, queue)
}

func (e *executor) LatestJobLimit(ctx context.Context, key string) (driver.Limit, string, bool, error) {
	var j driver.Job
	ok, err := found(scanJob(e.db.QueryRow(ctx, e.q.latestJobLimit, key), &j))
	if err != nil {
		return driver.Limit{}, "", false, fmt.Errorf("read the newest job of key %q: %w", key, err)
	}
	if !ok {
		return driver.Limit{}, "", false, nil
	}
	// A multi-key job may name the key among its More.
	for _, l := range j.Keys() {
		if l.Key == key {
			return l, j.Queue, true, nil
		}
	}
	return driver.Limit{}, "", false, fmt.Errorf("read the newest job of key %q: job %d does not name it", key, j.ID)
}
