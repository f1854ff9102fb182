-- +goose Up
-- Times are Unix microseconds.
-- A job lives in bq_jobs for its whole life; which execution table holds
-- its id says where it is (ready, scheduled, blocked, claimed, failed). A
-- job in none of them is finished (finished_at is set).
CREATE TABLE {prefix}jobs (
    id                      INTEGER PRIMARY KEY AUTOINCREMENT,
    kind                    TEXT        NOT NULL,
    queue                   TEXT        NOT NULL,
    args                    TEXT        NOT NULL,
    priority                INTEGER     NOT NULL DEFAULT 0,
    attempt                 INTEGER     NOT NULL DEFAULT 0,
    max_attempts            INTEGER     NOT NULL,
    concurrency_key         TEXT,
    concurrency_limit       INTEGER     NOT NULL DEFAULT 0,
    concurrency_duration_ms BIGINT      NOT NULL DEFAULT 0,
    on_conflict             INTEGER     NOT NULL DEFAULT 0,
    max_blocked             INTEGER     NOT NULL DEFAULT 0,
    scheduled_at            INTEGER     NOT NULL,
    created_at              INTEGER     NOT NULL,
    finished_at             INTEGER,
    discarded               INTEGER     NOT NULL DEFAULT 0,
    last_error              TEXT
);
CREATE INDEX {prefix}jobs_live_key ON {prefix}jobs (concurrency_key)
    WHERE concurrency_key IS NOT NULL AND finished_at IS NULL;
CREATE INDEX {prefix}jobs_finished_at ON {prefix}jobs (finished_at)
    WHERE finished_at IS NOT NULL;

CREATE TABLE {prefix}ready_executions (
    job_id     BIGINT      PRIMARY KEY REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    queue      TEXT        NOT NULL,
    priority   INTEGER     NOT NULL,
    created_at INTEGER     NOT NULL
);
CREATE INDEX {prefix}ready_poll ON {prefix}ready_executions (queue, priority DESC, job_id);

CREATE TABLE {prefix}scheduled_executions (
    job_id       BIGINT      PRIMARY KEY REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    queue        TEXT        NOT NULL,
    priority     INTEGER     NOT NULL,
    scheduled_at INTEGER     NOT NULL
);
CREATE INDEX {prefix}scheduled_due ON {prefix}scheduled_executions (scheduled_at, priority DESC, job_id);

CREATE TABLE {prefix}blocked_executions (
    job_id          BIGINT      PRIMARY KEY REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    queue           TEXT        NOT NULL,
    priority        INTEGER     NOT NULL,
    concurrency_key TEXT        NOT NULL,
    created_at      INTEGER     NOT NULL
);
CREATE INDEX {prefix}blocked_line ON {prefix}blocked_executions (concurrency_key, priority DESC, job_id);

CREATE TABLE {prefix}processes (
    id                    INTEGER PRIMARY KEY AUTOINCREMENT,
    kind                  TEXT        NOT NULL,
    name                  TEXT        NOT NULL,
    hostname              TEXT        NOT NULL,
    pid                   INTEGER     NOT NULL,
    queues                TEXT        NOT NULL DEFAULT '',
    heartbeat_interval_ms BIGINT      NOT NULL,
    started_at            INTEGER     NOT NULL,
    last_heartbeat_at     INTEGER     NOT NULL
);
CREATE INDEX {prefix}processes_heartbeat ON {prefix}processes (last_heartbeat_at);

-- fence is unique per claim: a worker's completion names it, so a claim
-- that was reaped and claimed again cannot be completed by the old worker.
CREATE TABLE {prefix}claimed_executions (
    fence      INTEGER     PRIMARY KEY AUTOINCREMENT,
    job_id     BIGINT      NOT NULL UNIQUE REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    queue      TEXT        NOT NULL,
    process_id BIGINT      NOT NULL,
    claimed_at INTEGER     NOT NULL
);
CREATE INDEX {prefix}claimed_process ON {prefix}claimed_executions (process_id);
CREATE INDEX {prefix}claimed_queue ON {prefix}claimed_executions (queue);

CREATE TABLE {prefix}failed_executions (
    job_id    BIGINT      PRIMARY KEY REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    queue     TEXT        NOT NULL,
    error     TEXT        NOT NULL,
    failed_at INTEGER     NOT NULL
);

-- value is the key's free slots: lim minus the key's ready and claimed
-- jobs. blocked counts the key's blocked executions.
CREATE TABLE {prefix}semaphores (
    key         TEXT        PRIMARY KEY,
    value       INTEGER     NOT NULL,
    lim         INTEGER     NOT NULL,
    blocked     INTEGER     NOT NULL DEFAULT 0,
    duration_ms BIGINT      NOT NULL,
    expires_at  INTEGER     NOT NULL
);
CREATE INDEX {prefix}semaphores_expires ON {prefix}semaphores (expires_at);

-- Operations policy per queue, owned by one namespace (SyncPolicies).
-- Zero means no limit.
CREATE TABLE {prefix}policies (
    queue              TEXT        PRIMARY KEY,
    namespace          TEXT        NOT NULL,
    max_active         INTEGER     NOT NULL DEFAULT 0,
    max_active_per_key INTEGER     NOT NULL DEFAULT 0,
    max_blocked        INTEGER     NOT NULL DEFAULT 0,
    created_at         INTEGER     NOT NULL,
    updated_at         INTEGER     NOT NULL
);
CREATE INDEX {prefix}policies_namespace ON {prefix}policies (namespace);

-- Runtime limit overrides by full key (SetKeyLimit); they beat the job's.
CREATE TABLE {prefix}key_limits (
    key        TEXT        PRIMARY KEY,
    lim        INTEGER     NOT NULL,
    updated_at INTEGER     NOT NULL
);

-- +goose Down
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
