-- +goose Up
-- MySQL 8.0+ and MariaDB 10.6+, InnoDB, utf8mb4.
--
-- Times are Unix microseconds (BIGINT), as in the SQLite schema: no
-- session time zone, parseTime or loc setting of a pool can shift them.
--
-- args is JSON text checked by JSON_VALID rather than MySQL's JSON type,
-- which re-encodes documents (numbers beyond 64-bit integers become
-- doubles): a job's args come back exactly as they were enqueued.
--
-- Queue names and concurrency keys are VARBINARY: compared byte for byte,
-- with no collation folding case or padding trailing spaces (two keys
-- that differ only there must not share a limit). A key may be up to 4096
-- bytes (1,024 characters of any script), more than InnoDB's 3072-byte
-- index limit, so keys are looked up and indexed through their SHA-256:
-- a stored generated column on jobs and blocked_executions, and the
-- primary key of semaphores (MariaDB refuses a generated primary key, so
-- the driver writes it and a CHECK keeps it honest).
--
-- A job lives in bq_jobs for its whole life; which execution table holds
-- its id says where it is (ready, scheduled, blocked, claimed, failed). A
-- job in none of them is finished (finished_at is set).
CREATE TABLE {prefix}jobs (
    id                      BIGINT          NOT NULL AUTO_INCREMENT PRIMARY KEY,
    kind                    TEXT            NOT NULL,
    queue                   VARBINARY(128)  NOT NULL,
    args                    LONGTEXT        NOT NULL,
    priority                INT             NOT NULL DEFAULT 0,
    attempt                 INT             NOT NULL DEFAULT 0,
    max_attempts            INT             NOT NULL,
    concurrency_key         VARBINARY(4096),
    concurrency_key_hash    BINARY(32)      AS (UNHEX(SHA2(concurrency_key, 256))) STORED,
    concurrency_limit       INT             NOT NULL DEFAULT 0,
    concurrency_duration_ms BIGINT          NOT NULL DEFAULT 0,
    on_conflict             SMALLINT        NOT NULL DEFAULT 0,
    max_blocked             INT             NOT NULL DEFAULT 0,
    scheduled_at            BIGINT          NOT NULL,
    created_at              BIGINT          NOT NULL,
    finished_at             BIGINT,
    discarded               BOOLEAN         NOT NULL DEFAULT FALSE,
    last_error              MEDIUMTEXT,
    INDEX {prefix}jobs_live_key (concurrency_key_hash, finished_at),
    INDEX {prefix}jobs_finished_at (finished_at),
    CONSTRAINT {prefix}jobs_args_json CHECK (JSON_VALID(args))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE {prefix}ready_executions (
    job_id     BIGINT         NOT NULL PRIMARY KEY,
    queue      VARBINARY(128) NOT NULL,
    priority   INT            NOT NULL,
    created_at BIGINT         NOT NULL,
    INDEX {prefix}ready_poll (queue, priority DESC, job_id),
    CONSTRAINT {prefix}ready_job_fk FOREIGN KEY (job_id) REFERENCES {prefix}jobs (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE {prefix}scheduled_executions (
    job_id       BIGINT         NOT NULL PRIMARY KEY,
    queue        VARBINARY(128) NOT NULL,
    priority     INT            NOT NULL,
    scheduled_at BIGINT         NOT NULL,
    INDEX {prefix}scheduled_due (scheduled_at, priority DESC, job_id),
    CONSTRAINT {prefix}scheduled_job_fk FOREIGN KEY (job_id) REFERENCES {prefix}jobs (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE {prefix}blocked_executions (
    job_id               BIGINT          NOT NULL PRIMARY KEY,
    queue                VARBINARY(128)  NOT NULL,
    priority             INT             NOT NULL,
    concurrency_key      VARBINARY(4096) NOT NULL,
    concurrency_key_hash BINARY(32)      AS (UNHEX(SHA2(concurrency_key, 256))) STORED,
    created_at           BIGINT          NOT NULL,
    INDEX {prefix}blocked_line (concurrency_key_hash, priority DESC, job_id),
    CONSTRAINT {prefix}blocked_job_fk FOREIGN KEY (job_id) REFERENCES {prefix}jobs (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE {prefix}processes (
    id                    BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    kind                  TEXT   NOT NULL,
    name                  TEXT   NOT NULL,
    hostname              TEXT   NOT NULL,
    pid                   INT    NOT NULL,
    queues                TEXT   NOT NULL,
    heartbeat_interval_ms BIGINT NOT NULL,
    started_at            BIGINT NOT NULL,
    last_heartbeat_at     BIGINT NOT NULL,
    INDEX {prefix}processes_heartbeat (last_heartbeat_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- fence is unique per claim: a worker's completion names it, so a claim
-- that was reaped and claimed again cannot be completed by the old worker.
-- InnoDB persists the AUTO_INCREMENT counter across restarts (MySQL 8.0,
-- MariaDB 10.2.4+), so a fence is never handed out twice.
CREATE TABLE {prefix}claimed_executions (
    fence      BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_id     BIGINT         NOT NULL,
    queue      VARBINARY(128) NOT NULL,
    process_id BIGINT         NOT NULL,
    claimed_at BIGINT         NOT NULL,
    UNIQUE INDEX {prefix}claimed_job (job_id),
    INDEX {prefix}claimed_process (process_id),
    INDEX {prefix}claimed_queue (queue),
    CONSTRAINT {prefix}claimed_job_fk FOREIGN KEY (job_id) REFERENCES {prefix}jobs (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE {prefix}failed_executions (
    job_id    BIGINT         NOT NULL PRIMARY KEY,
    queue     VARBINARY(128) NOT NULL,
    error     MEDIUMTEXT     NOT NULL,
    failed_at BIGINT         NOT NULL,
    CONSTRAINT {prefix}failed_job_fk FOREIGN KEY (job_id) REFERENCES {prefix}jobs (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- value is the key's free slots: lim minus the key's ready and claimed
-- jobs. blocked counts the key's blocked executions. key_hash, the
-- SHA-256 of key, is the primary key: row locks on it are record locks,
-- and INSERT ... ON DUPLICATE KEY UPDATE on it takes no gap lock.
CREATE TABLE {prefix}semaphores (
    key_hash    BINARY(32)      NOT NULL PRIMARY KEY,
    `key`       VARBINARY(4096) NOT NULL,
    value       INT             NOT NULL,
    lim         INT             NOT NULL,
    blocked     INT             NOT NULL DEFAULT 0,
    duration_ms BIGINT          NOT NULL,
    expires_at  BIGINT          NOT NULL,
    INDEX {prefix}semaphores_expires (expires_at),
    CONSTRAINT {prefix}semaphores_key_hash CHECK (key_hash = UNHEX(SHA2(`key`, 256)))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Operations policy per queue, owned by one namespace (SyncPolicies).
-- Zero means no limit.
CREATE TABLE {prefix}policies (
    queue              VARBINARY(128) NOT NULL PRIMARY KEY,
    namespace          VARBINARY(255) NOT NULL,
    max_active         INT            NOT NULL DEFAULT 0,
    max_active_per_key INT            NOT NULL DEFAULT 0,
    max_blocked        INT            NOT NULL DEFAULT 0,
    created_at         BIGINT         NOT NULL,
    updated_at         BIGINT         NOT NULL,
    INDEX {prefix}policies_namespace (namespace)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Runtime limit overrides by full key (SetKeyLimit); they beat the job's.
CREATE TABLE {prefix}key_limits (
    key_hash   BINARY(32)      NOT NULL PRIMARY KEY,
    `key`      VARBINARY(4096) NOT NULL,
    lim        INT             NOT NULL,
    updated_at BIGINT          NOT NULL,
    CONSTRAINT {prefix}key_limits_key_hash CHECK (key_hash = UNHEX(SHA2(`key`, 256)))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- MySQL has no LISTEN/NOTIFY: a process announcing ready jobs bumps its
-- queue's counter, and listeners read the few rows of this table often.
CREATE TABLE {prefix}signals (
    queue VARBINARY(128) NOT NULL PRIMARY KEY,
    seq   BIGINT         NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}signals;
DROP TABLE {prefix}key_limits;
DROP TABLE {prefix}policies;
DROP TABLE {prefix}semaphores;
DROP TABLE {prefix}failed_executions;
DROP TABLE {prefix}claimed_executions;
DROP TABLE {prefix}processes;
DROP TABLE {prefix}blocked_executions;
DROP TABLE {prefix}scheduled_executions;
DROP TABLE {prefix}ready_executions;
DROP TABLE {prefix}jobs;
