-- +goose Up
-- Paused queues (PauseQueue): a queue with a row here claims nothing, in
-- every process; enqueues still succeed. A table of its own rather than a
-- column on policies: policies are a namespace's desired state, pruned by
-- SyncPolicies, while a pause is an operator's act on any queue, with or
-- without a policy, and must survive a sync. paused_at: Unix microseconds.
CREATE TABLE {prefix}paused_queues (
    queue     TEXT    PRIMARY KEY,
    paused_at INTEGER NOT NULL
);

-- +goose Down
DROP TABLE {prefix}paused_queues;
