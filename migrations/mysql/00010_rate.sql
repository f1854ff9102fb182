-- +goose Up
-- Rate limits (bq.Rate): see the PostgreSQL migration 00009 for the
-- design. Keys are indexed by their SHA-256 (key_hash), as semaphores
-- are. Times: Unix microseconds.
ALTER TABLE {prefix}jobs
    ADD COLUMN rate_key       VARBINARY(4096),
    ADD COLUMN rate_limit     INT    NOT NULL DEFAULT 0,
    ADD COLUMN rate_period_ms BIGINT NOT NULL DEFAULT 0,
    -- The newest live job of a rate key (LatestJobRate), by the key's
    -- SHA-256 as concurrency_key_hash is.
    ADD COLUMN rate_key_hash  BINARY(32) AS (UNHEX(SHA2(rate_key, 256))) STORED,
    ADD INDEX {prefix}jobs_live_rate (rate_key_hash, finished_at);

CREATE TABLE {prefix}rate_limits (
    key_hash   BINARY(32)      NOT NULL PRIMARY KEY,
    rate_key   VARBINARY(4096) NOT NULL,
    lim        INT             NOT NULL,
    period_ms  BIGINT          NOT NULL,
    waiting    INT             NOT NULL DEFAULT 0,
    next_at    BIGINT,
    updated_at BIGINT          NOT NULL,
    INDEX {prefix}rate_limits_next (next_at),
    CONSTRAINT {prefix}rate_limits_key_hash CHECK (key_hash = UNHEX(SHA2(rate_key, 256)))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE {prefix}rate_starts (
    key_hash   BINARY(32) NOT NULL,
    slot       INT        NOT NULL,
    started_at BIGINT     NOT NULL,
    job_id     BIGINT,
    PRIMARY KEY (key_hash, slot),
    INDEX {prefix}rate_starts_oldest (key_hash, started_at),
    INDEX {prefix}rate_starts_job (job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE {prefix}rate_overrides (
    key_hash   BINARY(32)      NOT NULL PRIMARY KEY,
    rate_key   VARBINARY(4096) NOT NULL,
    lim        INT             NOT NULL,
    period_ms  BIGINT          NOT NULL,
    updated_at BIGINT          NOT NULL,
    CONSTRAINT {prefix}rate_overrides_key_hash CHECK (key_hash = UNHEX(SHA2(rate_key, 256)))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}rate_overrides;
DROP TABLE {prefix}rate_starts;
DROP TABLE {prefix}rate_limits;
ALTER TABLE {prefix}jobs DROP INDEX {prefix}jobs_live_rate, DROP COLUMN rate_key_hash,
    DROP COLUMN rate_period_ms, DROP COLUMN rate_limit, DROP COLUMN rate_key;
