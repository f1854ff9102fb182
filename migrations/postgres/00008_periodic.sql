-- +goose Up
-- Periodic jobs (Config.Periodic): one row per schedule the fleet runs.
-- next_run_at is the tick's identity: the process whose conditional
-- UPDATE (WHERE name = $1 AND next_run_at = $2) moves it on enqueues that
-- tick, in the same transaction; every other process changes no row and
-- enqueues nothing. seen_at is refreshed by the live processes whose code
-- has the schedule as stored; a row nobody refreshed for ProcessDeadAfter
-- is pruned (the schedule was removed from code). last_state is where
-- the last tick's job went (ready, blocked, scheduled, discarded).
CREATE TABLE {prefix}periodic_jobs (
    name        TEXT        PRIMARY KEY,
    kind        TEXT        NOT NULL,
    schedule    TEXT        NOT NULL,
    next_run_at TIMESTAMPTZ NOT NULL,
    last_run_at TIMESTAMPTZ,
    last_job_id BIGINT,
    last_state  TEXT,
    created_at  TIMESTAMPTZ NOT NULL,
    seen_at     TIMESTAMPTZ NOT NULL
);
-- The scheduler's one read a second: is any tick due?
CREATE INDEX {prefix}periodic_jobs_next ON {prefix}periodic_jobs (next_run_at);

-- +goose Down
DROP TABLE {prefix}periodic_jobs;
