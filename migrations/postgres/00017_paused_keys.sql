-- +goose Up
-- Paused keys (PauseKey): no job of a key with a row here is claimed, in
-- any process, whichever of its keys it is; its ready jobs keep their
-- slots and its blocked jobs their places. A table of its own, beside
-- paused_queues, for the same reason: an operator's act, not a policy.
CREATE TABLE {prefix}paused_keys (
    key       TEXT        PRIMARY KEY,
    paused_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE {prefix}paused_keys;
