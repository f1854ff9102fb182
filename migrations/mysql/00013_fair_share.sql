-- +goose Up
-- Fair share (bq.Policy.FairShare): a queue whose policy has fair_share
-- is claimed key by key, the key furthest below its weighted share of the
-- running jobs first. key_weight is the policy's default weight of the
-- queue's keys (0: 1); key_weights holds runtime weights by full key
-- (SetKeyWeight), which beat it.
ALTER TABLE {prefix}policies ADD COLUMN fair_share BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE {prefix}policies ADD COLUMN key_weight INT NOT NULL DEFAULT 0;
CREATE TABLE {prefix}key_weights (
    key_hash   BINARY(32)      NOT NULL PRIMARY KEY,
    `key`      VARBINARY(4096) NOT NULL,
    weight     INT             NOT NULL,
    updated_at BIGINT          NOT NULL,
    CONSTRAINT {prefix}key_weights_key_hash CHECK (key_hash = UNHEX(SHA2(`key`, 256)))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}key_weights;
ALTER TABLE {prefix}policies DROP COLUMN key_weight;
ALTER TABLE {prefix}policies DROP COLUMN fair_share;
