-- +goose Up
-- The execution tables keyed by their job's id as the rowid (INTEGER
-- PRIMARY KEY) rather than by a separate unique index beside the rowid:
-- every row a job moves through (ready, blocked, scheduled) is one b-tree
-- write fewer to insert and to delete, and a lookup by job id is one
-- search. A keyed job moves through two of them (blocked, then ready),
-- so it gains twice. The indexes end with the priority: the rowid, the
-- job id, follows it in every index entry, which keeps the line's order
-- (priority descending, then id) without storing the id twice.
-- job_keys becomes WITHOUT ROWID, its primary key the table itself: one
-- b-tree fewer for each of the two or more rows of a multi-key job.
CREATE TABLE {prefix}ready_executions_new (
    job_id     INTEGER PRIMARY KEY REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    queue      TEXT        NOT NULL,
    priority   INTEGER     NOT NULL,
    created_at INTEGER     NOT NULL
);
INSERT INTO {prefix}ready_executions_new SELECT job_id, queue, priority, created_at FROM {prefix}ready_executions;
DROP TABLE {prefix}ready_executions;
ALTER TABLE {prefix}ready_executions_new RENAME TO {prefix}ready_executions;
CREATE INDEX {prefix}ready_poll ON {prefix}ready_executions (queue, priority DESC);

CREATE TABLE {prefix}scheduled_executions_new (
    job_id       INTEGER PRIMARY KEY REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    queue        TEXT        NOT NULL,
    priority     INTEGER     NOT NULL,
    scheduled_at INTEGER     NOT NULL
);
INSERT INTO {prefix}scheduled_executions_new SELECT job_id, queue, priority, scheduled_at FROM {prefix}scheduled_executions;
DROP TABLE {prefix}scheduled_executions;
ALTER TABLE {prefix}scheduled_executions_new RENAME TO {prefix}scheduled_executions;
CREATE INDEX {prefix}scheduled_due ON {prefix}scheduled_executions (scheduled_at, priority DESC);

CREATE TABLE {prefix}blocked_executions_new (
    job_id          INTEGER PRIMARY KEY REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    queue           TEXT        NOT NULL,
    priority        INTEGER     NOT NULL,
    concurrency_key TEXT        NOT NULL,
    created_at      INTEGER     NOT NULL
);
INSERT INTO {prefix}blocked_executions_new SELECT job_id, queue, priority, concurrency_key, created_at FROM {prefix}blocked_executions;
DROP TABLE {prefix}blocked_executions;
ALTER TABLE {prefix}blocked_executions_new RENAME TO {prefix}blocked_executions;
CREATE INDEX {prefix}blocked_line ON {prefix}blocked_executions (concurrency_key, priority DESC);

CREATE TABLE {prefix}job_keys_new (
    job_id INTEGER NOT NULL REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    key    TEXT   NOT NULL,
    PRIMARY KEY (job_id, key)
) WITHOUT ROWID;
INSERT INTO {prefix}job_keys_new SELECT job_id, key FROM {prefix}job_keys;
DROP TABLE {prefix}job_keys;
ALTER TABLE {prefix}job_keys_new RENAME TO {prefix}job_keys;
CREATE INDEX {prefix}job_keys_key ON {prefix}job_keys (key, job_id);

-- +goose Down
CREATE TABLE {prefix}job_keys_old (
    job_id INTEGER NOT NULL REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    key    TEXT   NOT NULL,
    PRIMARY KEY (job_id, key)
);
INSERT INTO {prefix}job_keys_old SELECT job_id, key FROM {prefix}job_keys;
DROP TABLE {prefix}job_keys;
ALTER TABLE {prefix}job_keys_old RENAME TO {prefix}job_keys;
CREATE INDEX {prefix}job_keys_key ON {prefix}job_keys (key, job_id);

CREATE TABLE {prefix}blocked_executions_old (
    job_id          BIGINT      PRIMARY KEY REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    queue           TEXT        NOT NULL,
    priority        INTEGER     NOT NULL,
    concurrency_key TEXT        NOT NULL,
    created_at      INTEGER     NOT NULL
);
INSERT INTO {prefix}blocked_executions_old SELECT job_id, queue, priority, concurrency_key, created_at FROM {prefix}blocked_executions;
DROP TABLE {prefix}blocked_executions;
ALTER TABLE {prefix}blocked_executions_old RENAME TO {prefix}blocked_executions;
CREATE INDEX {prefix}blocked_line ON {prefix}blocked_executions (concurrency_key, priority DESC, job_id);

CREATE TABLE {prefix}scheduled_executions_old (
    job_id       BIGINT      PRIMARY KEY REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    queue        TEXT        NOT NULL,
    priority     INTEGER     NOT NULL,
    scheduled_at INTEGER     NOT NULL
);
INSERT INTO {prefix}scheduled_executions_old SELECT job_id, queue, priority, scheduled_at FROM {prefix}scheduled_executions;
DROP TABLE {prefix}scheduled_executions;
ALTER TABLE {prefix}scheduled_executions_old RENAME TO {prefix}scheduled_executions;
CREATE INDEX {prefix}scheduled_due ON {prefix}scheduled_executions (scheduled_at, priority DESC, job_id);

CREATE TABLE {prefix}ready_executions_old (
    job_id     BIGINT      PRIMARY KEY REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    queue      TEXT        NOT NULL,
    priority   INTEGER     NOT NULL,
    created_at INTEGER     NOT NULL
);
INSERT INTO {prefix}ready_executions_old SELECT job_id, queue, priority, created_at FROM {prefix}ready_executions;
DROP TABLE {prefix}ready_executions;
ALTER TABLE {prefix}ready_executions_old RENAME TO {prefix}ready_executions;
CREATE INDEX {prefix}ready_poll ON {prefix}ready_executions (queue, priority DESC, job_id);
