-- +goose Up
-- Paused keys (PauseKey): no job of a key with a row here is claimed, in
-- any process, whichever of its keys it is; its ready jobs keep their
-- slots and its blocked jobs their places. A table of its own, beside
-- paused_queues, for the same reason: an operator's act, not a policy.
-- Keyed by the key's SHA-256, as the other key tables.
CREATE TABLE {prefix}paused_keys (
    key_hash  BINARY(32)      NOT NULL PRIMARY KEY,
    `key`     VARBINARY(4096) NOT NULL,
    paused_at BIGINT          NOT NULL,
    CONSTRAINT {prefix}paused_keys_key_hash CHECK (key_hash = UNHEX(SHA2(`key`, 256)))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}paused_keys;
