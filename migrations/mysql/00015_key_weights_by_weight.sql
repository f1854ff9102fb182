-- +goose Up
-- A fair claim reads the largest weight a key has (driver.KeyView's
-- MaxWeight) at every claim, to know whether the head of the ready line
-- can decide it: this index makes that an index probe, whatever the
-- number of keys with a weight.
CREATE INDEX {prefix}key_weights_weight ON {prefix}key_weights (weight);

-- +goose Down
DROP INDEX {prefix}key_weights_weight ON {prefix}key_weights;
