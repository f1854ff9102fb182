-- +goose Up
-- job_key_paused(job) is whether a key of job is paused (paused_keys):
-- its concurrency key or, for a multi-key job, one of its further keys.
-- Every claim statement tests it, behind a probe of paused_keys that
-- skips it while no key is paused. A PL/pgSQL function, never inlined,
-- so the claims planned anew in a transaction (the hand-off, the claim
-- rule's) plan one call rather than its three subqueries: 0.3 ms of
-- planning a claim, measured with EXPLAIN (SUMMARY).
-- +goose StatementBegin
CREATE FUNCTION {prefix}job_key_paused(job BIGINT) RETURNS BOOLEAN
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM {prefix}jobs j JOIN {prefix}paused_keys pk ON pk.key = j.concurrency_key WHERE j.id = job)
        OR EXISTS (SELECT 1 FROM {prefix}job_keys jk JOIN {prefix}paused_keys pk ON pk.key = jk.key WHERE jk.job_id = job);
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION {prefix}job_key_paused(BIGINT);
