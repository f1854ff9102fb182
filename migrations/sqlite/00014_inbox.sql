-- +goose Up
-- The inbox (docs/clients.md): jobs enqueued by clients in other
-- languages (clients/python, clients/typescript), one row per job, written
-- in the caller's own transaction. A bq Go process drains it: it enqueues
-- each pending row of a kind it defines through the Go enqueue and stamps
-- the row's outcome in the same transaction. outcome is NULL while
-- pending; then ready, blocked, scheduled, discarded, duplicate or
-- refused. Decided rows are deleted after the fleet's retention. Times
-- are Unix microseconds, as in bq's other tables; created_at defaults to
-- the inserting host's clock, so a client need not pass it.
CREATE TABLE {prefix}inbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    kind       TEXT    NOT NULL,
    args       TEXT    NOT NULL,
    options    TEXT    NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)),
    outcome    TEXT,
    job_id     INTEGER,
    detail     TEXT,
    decided_at INTEGER
);
CREATE INDEX {prefix}inbox_pending ON {prefix}inbox (outcome, id);
CREATE INDEX {prefix}inbox_decided ON {prefix}inbox (decided_at) WHERE decided_at IS NOT NULL;

-- +goose Down
DROP TABLE {prefix}inbox;
