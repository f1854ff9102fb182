-- +goose Up
-- Rate limits (bq.Rate): at most lim job starts per period per rate key.
--
-- A job's rate key and spec ride on its row. rate_limits holds one row per
-- key in use: its limit and period as last resolved, how many jobs wait in
-- its line (blocked_executions rows whose concurrency_key is '/rate/' +
-- the key: no job's concurrency key starts with '/'), and next_at, when a
-- slot of its ring next frees while jobs wait (NULL when none waits).
--
-- rate_starts is the key's ring: lim slots, each holding the instant of
-- one of the key's last lim starts. A start takes a slot whose instant is
-- at least one period old, so no window of one period holds more than lim
-- starts. A slot reserved for a ready job (job_id set) carries a far
-- future instant, so free slots sort first; the job's claim turns the
-- reservation into its start.
ALTER TABLE {prefix}jobs ADD COLUMN rate_key TEXT;
ALTER TABLE {prefix}jobs ADD COLUMN rate_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {prefix}jobs ADD COLUMN rate_period_ms BIGINT NOT NULL DEFAULT 0;
CREATE INDEX {prefix}jobs_live_rate ON {prefix}jobs (rate_key)
    WHERE rate_key IS NOT NULL AND finished_at IS NULL;

CREATE TABLE {prefix}rate_limits (
    rate_key   TEXT        PRIMARY KEY,
    lim        INTEGER     NOT NULL,
    period_ms  BIGINT      NOT NULL,
    waiting    INTEGER     NOT NULL DEFAULT 0,
    next_at    TIMESTAMPTZ,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX {prefix}rate_limits_next ON {prefix}rate_limits (next_at) WHERE next_at IS NOT NULL;

CREATE TABLE {prefix}rate_starts (
    rate_key   TEXT        NOT NULL,
    slot       INTEGER     NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    job_id     BIGINT,
    PRIMARY KEY (rate_key, slot)
);
CREATE INDEX {prefix}rate_starts_oldest ON {prefix}rate_starts (rate_key, started_at);
CREATE INDEX {prefix}rate_starts_job ON {prefix}rate_starts (job_id) WHERE job_id IS NOT NULL;

-- Runtime rate overrides by full key (SetKeyRate); they beat the job's.
CREATE TABLE {prefix}rate_overrides (
    rate_key   TEXT        PRIMARY KEY,
    lim        INTEGER     NOT NULL,
    period_ms  BIGINT      NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE {prefix}rate_overrides;
DROP TABLE {prefix}rate_starts;
DROP TABLE {prefix}rate_limits;
DROP INDEX {prefix}jobs_live_rate;
ALTER TABLE {prefix}jobs DROP COLUMN rate_period_ms;
ALTER TABLE {prefix}jobs DROP COLUMN rate_limit;
ALTER TABLE {prefix}jobs DROP COLUMN rate_key;
