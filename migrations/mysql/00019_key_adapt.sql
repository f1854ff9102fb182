-- +goose Up
-- Adaptive limits (bq.Adaptive, bq.Throttled): a key whose job was
-- throttled by its downstream has a row here holding its lowered limit
-- (lim, never below min_lim), the time of its last change and the
-- successes counted since, towards its next additive raise. The row goes
-- once the key is back at its maximum (its To, override or policy).
-- Keyed by the key's SHA-256, as the other key tables.
CREATE TABLE {prefix}key_adapt (
    key_hash   BINARY(32)      NOT NULL PRIMARY KEY,
    `key`      VARBINARY(4096) NOT NULL,
    lim        INT             NOT NULL,
    min_lim    INT             NOT NULL,
    successes  INT             NOT NULL DEFAULT 0,
    adapted_at BIGINT          NOT NULL,
    CONSTRAINT {prefix}key_adapt_key_hash CHECK (key_hash = UNHEX(SHA2(`key`, 256)))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}key_adapt;
