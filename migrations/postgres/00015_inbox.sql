-- +goose Up
-- The inbox (docs/clients.md): jobs enqueued by clients in other
-- languages (clients/python, clients/typescript), one row per job, written
-- in the caller's own transaction. A bq Go process drains it: it enqueues
-- each pending row of a kind it defines through the Go enqueue and stamps
-- the row's outcome in the same transaction. outcome is NULL while
-- pending; then ready, blocked, scheduled, discarded, duplicate or
-- refused. Decided rows are deleted after the fleet's retention.
-- A client notifies the channel {prefix}inbox in its transaction.
CREATE TABLE {prefix}inbox (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind       TEXT        NOT NULL,
    args       TEXT        NOT NULL,
    options    TEXT        NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    outcome    TEXT,
    job_id     BIGINT,
    detail     TEXT,
    decided_at TIMESTAMPTZ
);
CREATE INDEX {prefix}inbox_pending ON {prefix}inbox (id) WHERE outcome IS NULL;
CREATE INDEX {prefix}inbox_decided ON {prefix}inbox (decided_at) WHERE decided_at IS NOT NULL;

-- +goose Down
DROP TABLE {prefix}inbox;
