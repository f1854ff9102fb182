-- +goose Up
-- Rate limits (bq.Rate): see the PostgreSQL migration of the same number
-- for the design. Times: Unix microseconds.
ALTER TABLE {prefix}jobs ADD COLUMN rate_key TEXT;
ALTER TABLE {prefix}jobs ADD COLUMN rate_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {prefix}jobs ADD COLUMN rate_period_ms INTEGER NOT NULL DEFAULT 0;
-- The newest live job of a rate key (LatestJobRate).
CREATE INDEX {prefix}jobs_live_rate ON {prefix}jobs (rate_key) WHERE rate_key IS NOT NULL AND finished_at IS NULL;

CREATE TABLE {prefix}rate_limits (
    rate_key   TEXT    PRIMARY KEY,
    lim        INTEGER NOT NULL,
    period_ms  INTEGER NOT NULL,
    waiting    INTEGER NOT NULL DEFAULT 0,
    next_at    INTEGER,
    updated_at INTEGER NOT NULL
);
CREATE INDEX {prefix}rate_limits_next ON {prefix}rate_limits (next_at) WHERE next_at IS NOT NULL;

CREATE TABLE {prefix}rate_starts (
    rate_key   TEXT    NOT NULL,
    slot       INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    job_id     INTEGER,
    PRIMARY KEY (rate_key, slot)
);
CREATE INDEX {prefix}rate_starts_oldest ON {prefix}rate_starts (rate_key, started_at);
CREATE INDEX {prefix}rate_starts_job ON {prefix}rate_starts (job_id) WHERE job_id IS NOT NULL;

CREATE TABLE {prefix}rate_overrides (
    rate_key   TEXT    PRIMARY KEY,
    lim        INTEGER NOT NULL,
    period_ms  INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

-- +goose Down
DROP TABLE {prefix}rate_overrides;
DROP TABLE {prefix}rate_starts;
DROP TABLE {prefix}rate_limits;
DROP INDEX {prefix}jobs_live_rate;
ALTER TABLE {prefix}jobs DROP COLUMN rate_period_ms;
ALTER TABLE {prefix}jobs DROP COLUMN rate_limit;
ALTER TABLE {prefix}jobs DROP COLUMN rate_key;
