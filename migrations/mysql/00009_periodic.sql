-- +goose Up
-- Periodic jobs (Config.Periodic): one row per schedule the fleet runs.
-- next_run_at is the tick's identity: the process whose conditional
-- UPDATE (WHERE name = ? AND next_run_at = ?) moves it on enqueues that
-- tick, in the same transaction; every other process changes no row and
-- enqueues nothing. seen_at is refreshed by the live processes whose code
-- has the schedule as stored; a row nobody refreshed for ProcessDeadAfter
-- is pruned (the schedule was removed from code). last_state is where
-- the last tick's job went (ready, blocked, scheduled, discarded).
-- Times: Unix microseconds. name is VARBINARY, compared byte for byte.
CREATE TABLE {prefix}periodic_jobs (
    name        VARBINARY(128) NOT NULL PRIMARY KEY,
    kind        TEXT           NOT NULL,
    schedule    TEXT           NOT NULL,
    next_run_at BIGINT         NOT NULL,
    last_run_at BIGINT,
    last_job_id BIGINT,
    last_state  VARCHAR(32),
    created_at  BIGINT         NOT NULL,
    seen_at     BIGINT         NOT NULL,
    INDEX {prefix}periodic_jobs_next (next_run_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}periodic_jobs;
