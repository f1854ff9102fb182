-- +goose Up
-- Adaptive limits (bq.Adaptive, bq.Throttled): a key whose job was
-- throttled by its downstream has a row here holding its lowered limit
-- (lim, never below min_lim), the time of its last change and the
-- successes counted since, towards its next additive raise. The row goes
-- once the key is back at its maximum (its To, override or policy).
CREATE TABLE {prefix}key_adapt (
    key        TEXT        PRIMARY KEY,
    lim        INTEGER     NOT NULL,
    min_lim    INTEGER     NOT NULL,
    successes  INTEGER     NOT NULL DEFAULT 0,
    adapted_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE {prefix}key_adapt;
