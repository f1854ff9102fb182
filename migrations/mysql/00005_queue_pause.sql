-- +goose Up
-- Paused queues (PauseQueue): a queue with a row here claims nothing, in
-- every process; enqueues still succeed. A table of its own rather than a
-- column on policies: policies are a namespace's desired state, pruned by
-- SyncPolicies, while a pause is an operator's act on any queue, with or
-- without a policy, and must survive a sync. paused_at: Unix microseconds.
CREATE TABLE {prefix}paused_queues (
    queue     VARBINARY(128) NOT NULL PRIMARY KEY,
    paused_at BIGINT         NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}paused_queues;
