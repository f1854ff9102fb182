-- +goose Up
-- Fair share (bq.Policy.FairShare): a queue whose policy has fair_share
-- is claimed key by key, the key furthest below its weighted share of the
-- running jobs first. key_weight is the policy's default weight of the
-- queue's keys (0: 1); key_weights holds runtime weights by full key
-- (SetKeyWeight), which beat it.
ALTER TABLE {prefix}policies ADD COLUMN fair_share BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE {prefix}policies ADD COLUMN key_weight INTEGER NOT NULL DEFAULT 0;
CREATE TABLE {prefix}key_weights (
    key        TEXT        PRIMARY KEY,
    weight     INTEGER     NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE {prefix}key_weights;
ALTER TABLE {prefix}policies DROP COLUMN key_weight;
ALTER TABLE {prefix}policies DROP COLUMN fair_share;
