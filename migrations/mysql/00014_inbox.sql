-- +goose Up
-- The inbox (docs/clients.md): jobs enqueued by clients in other
-- languages (clients/python, clients/typescript), one row per job, written
-- in the caller's own transaction. A bq Go process drains it: it enqueues
-- each pending row of a kind it defines through the Go enqueue and stamps
-- the row's outcome in the same transaction. outcome is NULL while
-- pending; then ready, blocked, scheduled, discarded, duplicate or
-- refused. Decided rows are deleted after the fleet's retention. Its
-- times are the server's (DATETIME(6)), stamped and compared in SQL.
CREATE TABLE {prefix}inbox (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    kind       VARCHAR(255) NOT NULL,
    args       LONGTEXT     NOT NULL,
    options    TEXT         NOT NULL,
    created_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    outcome    VARCHAR(16),
    job_id     BIGINT,
    detail     TEXT,
    decided_at DATETIME(6),
    KEY {prefix}inbox_pending (outcome, id),
    KEY {prefix}inbox_decided (decided_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}inbox;
